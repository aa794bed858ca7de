#!/usr/bin/env bash
# The shipped Hopper kernel calibrations against the public kernel tables
# (data/public-measurements/hopper-kernels/) and perfcast's own H200 measurements
# (data/gpu-measurements/h200-2026-11-27/; docs/calibration.md):
# 1. refitting with the command of docs/calibration.md reproduces the shipped
#    configs/calibration/nvidia_h100_sxm5_80gb.json and nvidia_h200_sxm_141gb.json (every
#    family's efficiencies, overheads and errors within 1e-6 relative; date and commit aside),
#    so a change to the fit cannot leave stale calibrations behind;
# 2. the leave-one-source-out error per family (geometric mean over the held-out sources) meets
#    its goal: GEMM 10% (7.8% since a source timed with CUDA events around each launch is
#    harness-timed and every harness-timed source is scored after its own per-call cost;
#    11.3% before, when that cost counted as the model's error), attention 12% (3.5%),
#    memory-bound 10% (8.1%); and the kernels' time alone (harness-timed sources without their
#    own cost) stays within GEMM 12.5% (11.8%), attention 12% (5.4%), memory-bound 10% (9.3%).
# Usage: kernels_accuracy_test.sh PERFCAST_BINARY SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
cd "$src" || exit 1  # the calibrations record their measurement files relative to the repository
S=configs/systems
HK=data/public-measurements/hopper-kernels
H200=data/gpu-measurements/h200-2026-11-27
note=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["note"])' "$src/configs/calibration/nvidia_h100_sxm5_80gb.json")

mkdir -p "$tmp/fit"
"$perfcast" kernels --system "$S/h100_sxm.json" --system "$S/h200.json" --system "$S/h800.json" \
  --system "$S/pcie_8gpu.json" --system "$S/h100_nvl.json" --system "$S/gh200.json" \
  --measurements "$HK/gemm.csv" --measurements "$HK/attention.csv" --measurements "$HK/memory_bound.csv" \
  --measurements "$H200/gemm.jsonl" --measurements "$H200/memcpy_elementwise.jsonl" --measurements "$H200/torch_attention.csv" \
  --measurements "$H200/torch_gemm.csv" \
  --fit "$S/h100_sxm.json" --fit "$S/h200.json" --fit-dir "$tmp/fit" --note "$note" --json "$tmp/fit.json" > "$tmp/fit.txt"
check "fit command" test -s "$tmp/fit.json"

for cal in nvidia_h100_sxm5_80gb.json nvidia_h200_sxm_141gb.json; do
  check "refit reproduces configs/calibration/$cal" python3 - "$src/configs/calibration/$cal" "$tmp/fit/$cal" <<'PY'
import json, sys
shipped, refit = (json.load(open(p)) for p in sys.argv[1:3])
def same(a, b, where):
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        return all(same(a.get(k), b.get(k), f"{where}/{k}") for k in sorted(keys))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return all(same(x, y, f"{where}/{i}") for i, (x, y) in enumerate(zip(a, b)))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        ok = abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-12)
    elif isinstance(a, str) and isinstance(b, str) and a.endswith("us") and b.endswith("us"):
        ok = abs(float(a[:-2]) - float(b[:-2])) <= 1e-3
    else:
        ok = a == b
    if not ok: print(f"{where}: shipped {a!r}, refit {b!r}")
    return ok
for k in ("date", "perfcast_commit"):
    shipped.pop(k, None), refit.pop(k, None)
sys.exit(0 if same(shipped, refit, "") else 1)
PY
done

check "held-out error per family within its bound" python3 - "$tmp/fit.json" <<'PY'
import json, sys
bounds = {"gemm": (0.10, 0.125), "attention": (0.12, 0.12), "memory_bound": (0.10, 0.10)}
held = {f["family"]: f["held_out"] for f in json.load(open(sys.argv[1]))["summary"]["by_family"]}
ok = True
for family, (bound, alone_bound) in bounds.items():
    h = held.get(family)
    if h is None:
        print(f"{family}: missing")
        ok = False
        continue
    got, alone = h["per_source_geomean_abs_error"], h["kernels_alone_per_source_geomean_abs_error"]
    print(f"{family}: held out {100 * got:.2f}% (bound {100 * bound:.1f}%), kernels alone {100 * alone:.2f}% (bound {100 * alone_bound:.1f}%)")
    ok = ok and got <= bound and alone <= alone_bound
sys.exit(0 if ok else 1)
PY

echo "$fails failure(s)"
[ "$fails" = 0 ]
