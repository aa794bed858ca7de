#!/usr/bin/env bash
# Peak memory of perfcast's readers as a multiple of the input's size, for real inputs and
# for the JSON shapes that cost the most memory per byte. Usage:
#   bench/input_memory.sh PERFCAST_BINARY [MIB]     (MIB: size of the generated inputs, default 64)
# For each input: its size, the command's peak resident memory (GNU time's %M) minus the
# peak of the same command on a tiny input, and the ratio of the two. The exit status of
# each command is shown too (bad input exits 2 after reading, which is what is measured).
# Needs /usr/bin/time, python3 and gzip. Results are described in docs/robustness.md.
set -u
perfcast=$(realpath "$1")
mib=${2:-64}
src=$(cd "$(dirname "$0")/.." && pwd)
shared=$src/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bytes=$((mib * 1024 * 1024))

# gen SHAPE FILE: a JSON document of about $bytes bytes made of one repeated element.
gen() {
  python3 - "$1" "$2" "$bytes" <<'EOF'
import sys
shape, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "w") as f:
    if shape == "empty_arrays":       # [[],[],...]: one array value per 3 bytes
        n = size // 3; f.write("[" + ",".join(["[]"] * n) + "]")
    elif shape == "empty_objects":    # [{},{},...]: one object value per 3 bytes
        n = size // 3; f.write("[" + ",".join(["{}"] * n) + "]")
    elif shape == "zeros":            # [0,0,...]: one number per 2 bytes
        n = size // 2; f.write("[" + ",".join(["0"] * n) + "]")
    elif shape == "keys":             # {"k0":0,"k1":0,...}: one object member per ~12 bytes
        parts, n, i = [], 0, 0
        while n < size:
            s = f'"k{i}":0'; parts.append(s); n += len(s) + 1; i += 1
        f.write("{" + ",".join(parts) + "}")
EOF
}

# kineto_copies FILE: the Kineto trace $src/tests/data/kineto_two_steps.json with its events
# repeated (timestamps shifted by one trace span per copy) to about $bytes bytes.
kineto_copies() {
  python3 - "$src/tests/data/kineto_two_steps.json" "$1" "$bytes" <<'EOF'
import json, sys
src, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = json.load(open(src))
events = doc["traceEvents"]
timed = [e for e in events if "ts" in e]
span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1
one = len(json.dumps(events))
copies = max(1, size // one)
out = [e for e in events if "ts" not in e]
for c in range(copies):
    for e in timed:
        e2 = dict(e); e2["ts"] = e["ts"] + c * span; out.append(e2)
doc["traceEvents"] = out
json.dump(doc, open(path, "w"))
EOF
}

# nccl_copies FILE: the nccl-tests log's table rows repeated to about $bytes bytes.
nccl_copies() {
  python3 - "$src/tests/data/handwritten_all_reduce_perf.txt" "$1" "$bytes" <<'EOF'
import sys
lines = open(sys.argv[1]).read().splitlines(keepends=True)
rows = [l for l in lines if l.strip() and not l.lstrip().startswith("#")]
head = [l for l in lines if l.lstrip().startswith("#")]
block = "".join(rows); n = max(1, int(sys.argv[3]) // len(block))
open(sys.argv[2], "w").write("".join(head) + block * n)
EOF
}

peak_kib() {  # peak_kib COMMAND...: prints "KIB EXIT"
  /usr/bin/time -f %M -o "$tmp/time" "$@" > /dev/null 2>&1
  local code=$?
  echo "$(tail -1 "$tmp/time") $code"
}

report() {  # report NAME FILE BASELINE_KIB COMMAND...
  local name=$1 file=$2 base=$3
  shift 3
  local size kib code
  size=$(stat -c %s "$file")
  read -r kib code < <(peak_kib "$@")
  awk -v n="$name" -v s="$size" -v k="$kib" -v b="$base" -v c="$code" \
    'BEGIN { printf "%-34s %10.1f %10.1f %8.2f %5d\n", n, s / 1048576, (k - b) / 1024, (k - b) * 1024 / s, c }'
}

sys=$src/configs/systems/dgx_h100.json
wl=$src/configs/workloads/dlrm_default.json
echo '{}' > "$tmp/tiny.json"
base_predict=$(peak_kib "$perfcast" predict --system "$tmp/tiny.json" --workload "$wl" | cut -d' ' -f1)
base_trace=$(peak_kib "$perfcast" trace-stats "$src/tests/data/kineto_rank0.json" | cut -d' ' -f1)
base_comms=$(peak_kib "$perfcast" calibrate comms --system "$sys" --nccl-tests "$src/tests/data/handwritten_all_reduce_perf.txt" \
  --out "$tmp/c.json" | cut -d' ' -f1)

printf '%-34s %10s %10s %8s %5s\n' input MiB "peak MiB" "x size" exit
for shape in empty_arrays empty_objects zeros keys; do
  gen "$shape" "$tmp/$shape.json"
  report "system JSON: $shape" "$tmp/$shape.json" "$base_predict" "$perfcast" predict --system "$tmp/$shape.json" --workload "$wl"
done
kineto_copies "$tmp/kineto.json"
report "Kineto trace (trace-stats)" "$tmp/kineto.json" "$base_trace" "$perfcast" trace-stats "$tmp/kineto.json"
gzip -1 -c "$tmp/kineto.json" > "$tmp/kineto.json.gz"
report "Kineto trace .json.gz (vs gz size)" "$tmp/kineto.json.gz" "$base_trace" "$perfcast" trace-stats "$tmp/kineto.json.gz"
if [ -f "$shared/hta-a100-dlrm-rank3/control.json.gz" ]; then
  report "HTA A100 DLRM trace .json.gz" "$shared/hta-a100-dlrm-rank3/control.json.gz" "$base_trace" \
    "$perfcast" trace-stats "$shared/hta-a100-dlrm-rank3/control.json.gz"
fi
nccl_copies "$tmp/nccl.txt"
report "nccl-tests log (calibrate comms)" "$tmp/nccl.txt" "$base_comms" \
  "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/nccl.txt" --out "$tmp/c2.json"
