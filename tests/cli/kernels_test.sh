#!/usr/bin/env bash
# perfcast kernels: single kernels, measurement files (public tables and measurement JSON
# lines), bad rows (exit 2 naming file and row, nothing written), fitting a calibration.
# Usage: kernels_test.sh PERFCAST_BINARY SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
h100=$src/configs/systems/h100_sxm.json
h200=$src/configs/systems/h200.json
hk=$src/data/public-measurements/hopper-kernels

# expect NAME CODE PATTERN -- command...: the exit code and an output pattern; on exit 2 no
# file under $tmp/out (the command's --json, --csv and --fit-dir targets) is left.
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  rm -rf "$tmp/out" && mkdir -p "$tmp/out"
  "$@" > "$tmp/stdout" 2> "$tmp/stderr"
  local got=$?
  if [ "$got" != "$code" ]; then
    echo "FAIL $name: exit $got, expected $code"; cat "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -qF -- "$pattern" "$tmp/stderr" "$tmp/stdout"; then
    echo "FAIL $name: output lacks '$pattern'"; head -5 "$tmp/stderr" "$tmp/stdout"; fails=$((fails + 1)); return
  fi
  if [ "$code" = 2 ] && [ -n "$(ls -A "$tmp/out")" ]; then
    echo "FAIL $name: wrote a file on bad input"; ls "$tmp/out"; fails=$((fails + 1)); return
  fi
  echo "ok   $name"
}

# Single kernels, spec-derived: the GEMM model's hand-worked value (tests/predictors/spec_predictors_test.cpp
# checks the formula; here only that the command prints the kernel and its predictor).
expect "gemm" 0 "gemm 4096x4096x4096 bf16" -- "$perfcast" kernels --system "$h100" --gemm m=4096,n=4096,k=4096,dtype=bf16 --spec-derived
grep -q "gemm.spec_roofline" "$tmp/stdout" && echo "ok   spec-derived predictor named" || { echo "FAIL predictor"; fails=$((fails + 1)); }
expect "attention both passes" 0 "flash_attention_bwd" -- "$perfcast" kernels --system "$h100" \
  --attention batch=1,heads=16,kv_heads=4,seq=4096,head_dim=128,causal=1,pass=both,impl=cudnn
expect "memory-bound and embedding" 0 "embedding_fwd 8 tables batch 4096" -- "$perfcast" kernels --system "$h200" \
  --memory-bound bytes=64MiB --embedding tables=8,rows=1000000,dim=128,batch=4096,pooling=20,distribution=zipf:1.05
expect "json and csv" 0 "" -- "$perfcast" kernels --system "$h100" --gemm m=64,n=7168,k=2048,dtype=fp8,scaling=block,impl=deepgemm \
  --json "$tmp/out/k.json" --csv "$tmp/out/k.csv"
grep -q '"time_us"' "$tmp/out/k.json" && grep -q "^option,spec,kernel,time_us" "$tmp/out/k.csv" \
  && echo "ok   json and csv written" || { echo "FAIL json/csv"; fails=$((fails + 1)); }

# Bad arguments: exit 2, the option and key named.
expect "unknown key" 2 'unknown key "nn" (did you mean "n"?)' -- "$perfcast" kernels --system "$h100" --gemm m=1,nn=2,k=3 --json "$tmp/out/x.json"
expect "missing key" 2 'missing key "head_dim"' -- "$perfcast" kernels --system "$h100" --attention batch=1,heads=8,seq=128
expect "bad value" 2 "expected a whole number from 1 to" -- "$perfcast" kernels --system "$h100" --gemm m=0,n=2,k=3
expect "block scales need fp8" 2 "block scales apply to dtype=fp8" -- "$perfcast" kernels --system "$h100" --gemm m=1,n=2,k=3,scaling=block
expect "nothing to predict" 2 "nothing to predict" -- "$perfcast" kernels --system "$h100"
expect "thread waves need elements" 2 'needs "elements"' -- "$perfcast" kernels --system "$h200" \
  --memory-bound bytes=64MiB,thread_per_element=1
# A plain kernel of one thread per element pays the shipped calibration's waves: 4,194,304
# elements are 15.5 waves of the H200's 132 x 2,048 resident threads, slower than the same
# bytes in a kernel that does not say so.
"$perfcast" kernels --system "$h200" --memory-bound bytes=64MiB,elements=4194304,cold_l2=1 --json "$tmp/out/vec.json" > /dev/null
"$perfcast" kernels --system "$h200" --memory-bound bytes=64MiB,elements=4194304,cold_l2=1,thread_per_element=1 \
  --json "$tmp/out/plain.json" > /dev/null
python3 - "$tmp/out/vec.json" "$tmp/out/plain.json" <<'PY' && echo "ok   thread waves add time" || { echo "FAIL thread waves"; fails=$((fails + 1)); }
import json, sys
t = [json.load(open(p))["kernels"][0]["time_us"] for p in sys.argv[1:3]]
sys.exit(0 if t[1] > t[0] > 0 else 1)
PY

# Measurement files: every row predicted or named as not expressible.
expect "public gemm table" 0 "geomean |err|" -- "$perfcast" kernels --system "$h100" --system "$h200" --measurements "$hk/gemm.csv" \
  --json "$tmp/out/g.json" --csv "$tmp/out/g.csv"
grep -q "no --system with a H800 GPU" "$tmp/stdout" && echo "ok   rows of other GPUs named" || { echo "FAIL other GPUs"; fails=$((fails + 1)); }
rows=$(($(wc -l < "$tmp/out/g.csv") - 1))
[ "$rows" = 1096 ] && echo "ok   every gemm row in the csv" || { echo "FAIL csv rows $rows"; fails=$((fails + 1)); }
# Held out alone: a harness-timed source (torchao's do_bench rows) is scored after a per-call
# constant of its own, and the kernels' time alone is reported beside it, never smaller.
"$perfcast" kernels --system "$h100" --system "$h200" --measurements "$hk/gemm.csv" --leave-one-source-out \
  --json "$tmp/out/loso.json" > /dev/null
python3 - "$tmp/out/loso.json" <<'PY' && echo "ok   held out: harness constant and kernels alone" || { echo "FAIL held-out harness"; fails=$((fails + 1)); }
import json, sys
d = json.load(open(sys.argv[1]))
gemm = [f for f in d["summary"]["by_family"] if f["family"] == "gemm"][0]
torchao = [s for s in d["summary"]["by_source"] if s["source"] == "torchao_blockwise_fp8_inference"][0]
rows = [r for r in d["rows"] if r["source"] == "torchao_blockwise_fp8_inference" and "heldout_predicted_us" in r]
assert rows and all(r["heldout_harness_us"] > 0 for r in rows), "torchao rows without their constant"
assert all(abs(r["predicted_us"] - r["heldout_predicted_us"]) < 1e-9 for r in rows)
assert torchao["kernels_alone"]["geomean_abs_error"] > torchao["geomean_abs_error"], torchao
assert gemm["kernels_alone_per_source_geomean_abs_error"] >= gemm["per_source_geomean_abs_error"], gemm
PY
expect "memory-bound table names what it cannot express" 0 "composite eager op" -- "$perfcast" kernels --system "$h100" \
  --system "$h200" --measurements "$hk/memory_bound.csv"
grep -q "plain launch stream" "$tmp/stdout" && echo "ok   launch streams named" || { echo "FAIL launch streams"; fails=$((fails + 1)); }
expect "embedding tables" 0 "embedding" -- "$perfcast" kernels --system "$h100" --measurements "$hk/embedding.csv" \
  --measurements "$src/data/public-measurements/embedding_kernel_times_h100.csv"

# Bad rows: exit 2 naming the file and the row; no output written.
python3 - "$hk/gemm.csv" "$tmp/bad_time.csv" "$tmp/bad_fields.csv" "$tmp/bad_shape.csv" <<'PY'
import csv, io, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
h = rows[0]
def write(path, row):
    out = io.StringIO(); w = csv.writer(out, lineterminator="\n"); w.writerow(h); w.writerow(rows[1]); w.writerow(row)
    open(path, "w").write(out.getvalue())
r = list(rows[2]); r[h.index("time_us")] = "-3"; write(sys.argv[2], r)
write(sys.argv[3], rows[2][:-2])
r = list(rows[2]); r[h.index("K")] = "7168.5"; write(sys.argv[4], r)
PY
expect "negative time" 2 "bad_time.csv: line 3 (gem-00002): column time_us: expected a positive number" -- \
  "$perfcast" kernels --system "$h100" --measurements "$tmp/bad_time.csv" --json "$tmp/out/x.json" --csv "$tmp/out/x.csv"
expect "short row" 2 "bad_fields.csv: line 3 (gem-00002): expected 22 fields, got 20" -- \
  "$perfcast" kernels --system "$h100" --measurements "$tmp/bad_fields.csv" --json "$tmp/out/x.json"
expect "fractional shape" 2 "line 3 (gem-00002): column K: expected a positive whole number" -- \
  "$perfcast" kernels --system "$h100" --measurements "$tmp/bad_shape.csv" --json "$tmp/out/x.json"
# Hostile sizes: a sequence or a table count that would make the model loop for hours.
python3 - "$hk/attention.csv" "$tmp/long_seq.csv" "$hk/embedding.csv" "$tmp/many_tables.csv" <<'PY'
import csv, io, sys
def one(src, dst, edit):
    rows = list(csv.reader(open(src, newline="")))
    h = rows[0]; r = list(rows[1]); edit(h, r)
    out = io.StringIO(); csv.writer(out, lineterminator="\n").writerows([h, r]); open(dst, "w").write(out.getvalue())
def seq(h, r): r[h.index("seqlen_q")] = "1000000000"
def tables(h, r):
    r[h.index("num_tables")] = "1000000000"; r[h.index("rows_per_table")] = "100"; r[h.index("embedding_dim")] = "128"
    r[h.index("implementation")] = "FBGEMM"
one(sys.argv[1], sys.argv[2], seq)
one(sys.argv[3], sys.argv[4], tables)
PY
expect "sequence too long" 2 "long_seq.csv: line 2 (att-00059): sequence longer than 2^24 tokens" -- \
  "$perfcast" kernels --system "$h100" --measurements "$tmp/long_seq.csv" --json "$tmp/out/x.json"
expect "too many tables" 2 "many_tables.csv: line 2 (emb-00001): tables (1 to 100000)" -- \
  "$perfcast" kernels --system "$h100" --measurements "$tmp/many_tables.csv" --json "$tmp/out/x.json"
expect "attention sequence limit" 2 "expected a whole number from 1 to 16777216" -- \
  "$perfcast" kernels --system "$h100" --attention batch=1,heads=1,seq=100000000000,head_dim=64
expect "missing --fit-dir" 2 "expected an existing folder, got" -- \
  "$perfcast" kernels --system "$h100" --measurements "$hk/gemm.csv" --fit "$h100" --fit-dir "$tmp/out/nope"
printf 'a,b,c\n1,2,3\n' > "$tmp/unknown.csv"
expect "unknown table" 2 "unknown.csv: line 1: not a measurement table" -- "$perfcast" kernels --system "$h100" --measurements "$tmp/unknown.csv"
expect "missing file" 2 "nope.csv" -- "$perfcast" kernels --system "$h100" --measurements "$tmp/nope.csv" --json "$tmp/out/x.json"

# Measurement JSON lines (perfcast profile's format) are read too.
cat > "$tmp/m.jsonl" <<'JL'
{"schema": "perfcast.measurement", "schema_version": "1.0", "kernel": {"family": "gemm", "m": 4096, "n": 4096, "k": 4096, "batch": 1, "dtype": "bf16", "bias_epilogue": false}, "timing": {"timer": "cupti", "repetitions": 10, "median": "200us"}, "device": {"name": "NVIDIA H100 80GB HBM3"}}
{"schema": "perfcast.measurement", "schema_version": "1.0", "kernel": {"family": "attention_forward", "batch": 1, "heads": 16, "seq_q": 4096, "head_dim": 128, "causal": true, "dtype": "bf16", "implementation": "cudnn"}, "timing": {"timer": "cupti", "repetitions": 10, "median": "250us"}, "device": {"name": "NVIDIA H100 80GB HBM3"}}
JL
expect "measurement lines" 0 "m.jsonl" -- "$perfcast" kernels --system "$h100" --measurements "$tmp/m.jsonl" --csv "$tmp/out/m.csv"
[ "$(grep -c 'm.jsonl,line' "$tmp/out/m.csv")" = 2 ] && echo "ok   both lines predicted" || { echo "FAIL jsonl rows"; cat "$tmp/out/m.csv"; fails=$((fails + 1)); }

# Fitting: a calibration written for the system's GPU, that predict can use.
expect "fit" 0 "fitted calibration" -- "$perfcast" kernels --system "$h100" --system "$h200" --measurements "$hk/gemm.csv" \
  --measurements "$hk/memory_bound.csv" --fit "$h100" --fit-dir "$tmp/out"
cal=$tmp/out/nvidia_h100_sxm5_80gb.json
grep -q '"kernel_model": 2' "$cal" && grep -q '"heldout_geomean_abs_error"' "$cal" && grep -q '"basis": "public measurements"' "$cal" \
  && echo "ok   fitted file records model, basis and held-out errors" || { echo "FAIL fitted file"; fails=$((fails + 1)); }
cp "$cal" "$tmp/cal.json"
expect "predict uses the fitted file" 0 "from public measurements" -- "$perfcast" predict --system "$src/configs/systems/dgx_h100.json" \
  --workload "$src/configs/workloads/dlrm_default.json" --calibration "$tmp/cal.json"

echo "$fails failure(s)"
[ "$fails" = 0 ]
