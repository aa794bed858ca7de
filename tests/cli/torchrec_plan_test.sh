#!/usr/bin/env bash
# TorchRec-shaped plans on the command line: shard --plan-format torchrec writes one,
# predict reads it back to the same time, host-memory kernels (fused_uvm,
# fused_uvm_caching) change the prediction, and compute kernels perfcast does not model are
# refused (exit 2, the file and JSON path named, nothing written).
# Usage: torchrec_plan_test.sh PERFCAST_BINARY SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
sys=$src/configs/systems/dgx_h100.json
wl=$src/configs/workloads/dlrm_default.json

# expect NAME CODE PATTERN -- command...: the exit code and an output pattern; no --json file left on exit 2.
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  rm -f "$tmp/out.json"
  "$@" > "$tmp/stdout" 2> "$tmp/stderr"
  local got=$?
  if [ "$got" != "$code" ]; then
    echo "FAIL $name: exit $got, expected $code"; cat "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -qF -- "$pattern" "$tmp/stderr" "$tmp/stdout"; then
    echo "FAIL $name: output lacks '$pattern'"; cat "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if [ "$code" = 2 ] && [ -e "$tmp/out.json" ]; then
    echo "FAIL $name: wrote a file on bad input"; fails=$((fails + 1)); return
  fi
  echo "ok   $name"
}

# The number after "KEY": in a JSON file, first occurrence after a line matching AFTER.
number() { awk -v key="\"$1\": " -v after="$3" 'index($0, after) { on = 1 } on && index($0, key) { sub(/.*": /, ""); sub(/,$/, ""); print; exit }' "$2"; }

expect "shard writes a TorchRec plan" 0 "best (search)" -- "$perfcast" shard --system "$sys" --workload "$wl" --evaluations 60 \
  --plan-format torchrec --out "$tmp/torchrec_plan.json" --json "$tmp/shard.json"
grep -q '"sparse_arch.embedding_bag_collection"' "$tmp/torchrec_plan.json" && grep -q '"shards"' "$tmp/torchrec_plan.json" \
  && ! grep -q '"schema"' "$tmp/torchrec_plan.json" && echo "ok   plan in TorchRec's shape" \
  || { echo "FAIL plan shape"; fails=$((fails + 1)); }

expect "predict reads the TorchRec plan" 0 "(TorchRec plan)" -- "$perfcast" predict --system "$sys" --workload "$wl" \
  --plan "$tmp/torchrec_plan.json" --json "$tmp/predict.json"
best=$(number iteration_time_s "$tmp/shard.json" '"best": {')
again=$(number iteration_time_s "$tmp/predict.json" '{')
[ -n "$best" ] && [ -n "$again" ] && awk -v a="$best" -v b="$again" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-9 * a) }' && echo "ok   same time from the written plan ($best s)" \
  || { echo "FAIL written plan predicts $again s, search said $best s"; fails=$((fails + 1)); }

expect "shard writes the flat format by default" 0 "" -- "$perfcast" shard --system "$sys" --workload "$wl" --evaluations 20 --out "$tmp/flat_plan.json"
grep -q '"schema": "perfcast.plan"' "$tmp/flat_plan.json" && echo "ok   flat plan" || { echo "FAIL flat plan"; fails=$((fails + 1)); }
expect "predict reads the flat plan" 0 "predicted iteration time" -- "$perfcast" predict --system "$sys" --workload "$wl" --plan "$tmp/flat_plan.json"

expect "unknown plan format" 2 "--plan-format: torch: expected" -- "$perfcast" shard --system "$sys" --workload "$wl" --evaluations 5 \
  --plan-format torch --json "$tmp/out.json"

sed 's/"compute_kernel": "fused"/"compute_kernel": "fused_uvm_caching"/' "$tmp/torchrec_plan.json" > "$tmp/uvm_plan.json"
expect "UVM caching predicted" 0 "predicted iteration time" -- "$perfcast" predict --system "$sys" --workload "$wl" \
  --plan "$tmp/uvm_plan.json" --json "$tmp/uvm.json"
uvm=$(number iteration_time_s "$tmp/uvm.json" '{')
[ -n "$uvm" ] && awk -v u="$uvm" -v h="$again" 'BEGIN { exit !(u > h * 1.001) }' && echo "ok   UVM caching is slower than HBM ($uvm s against $again s)" \
  || { echo "FAIL UVM caching predicts $uvm s, HBM $again s"; fails=$((fails + 1)); }
sed 's/"compute_kernel": "fused"/"compute_kernel": "fused_uvm"/' "$tmp/torchrec_plan.json" > "$tmp/uvm_only.json"
expect "UVM predicted" 0 "predicted iteration time" -- "$perfcast" predict --system "$sys" --workload "$wl" \
  --plan "$tmp/uvm_only.json" --json "$tmp/uvm_only_out.json"
uvm_only=$(number iteration_time_s "$tmp/uvm_only_out.json" '{')
[ -n "$uvm_only" ] && awk -v u="$uvm_only" -v c="$uvm" 'BEGIN { exit !(u > c) }' && echo "ok   UVM is slower than UVM caching ($uvm_only s)" \
  || { echo "FAIL UVM predicts $uvm_only s, UVM caching $uvm s"; fails=$((fails + 1)); }
expect "run refuses a host-memory plan (its executor keeps tables in HBM)" 2 "perfcast run executes HBM-resident tables only" -- \
  "$perfcast" run --system "$sys" --workload "$wl" --plan "$tmp/uvm_plan.json"
sed 's/"compute_kernel": "fused"/"compute_kernel": "quant"/' "$tmp/torchrec_plan.json" > "$tmp/quant_plan.json"
expect "quantized kernel refused, not ignored" 2 'compute_kernel: compute_kernel "quant" is not modelled' -- \
  "$perfcast" predict --system "$sys" --workload "$wl" --plan "$tmp/quant_plan.json" --json "$tmp/out.json"

sed 's|"placement": "rank:\([0-9]\)/cuda:[0-9]"|"placement": "rank:\1/cuda:9"|' "$tmp/torchrec_plan.json" > "$tmp/bad_local.json"
expect "placement's local GPU checked" 2 "not cuda:9" -- "$perfcast" predict --system "$sys" --workload "$wl" --plan "$tmp/bad_local.json" --json "$tmp/out.json"

# ShardingPlan._serialize()'s shape ({"plan": {module: {table: {..., "shards": [...]}}}}) with
# the fields TorchRec's planner copies into every ParameterSharding: read to the same time.
python3 - "$tmp/torchrec_plan.json" "$tmp/serialized.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
for tables in plan.values():
    for t in tables.values():
        spec = t.pop("sharding_spec", None)
        if spec is not None:
            t["shards"] = spec["shards"]
        t.update({"enforce_hbm": None, "stochastic_rounding": True, "bounds_check_mode": 3, "output_dtype": "FP32",
                  "key_value_params": None})
json.dump({"plan": plan}, open(sys.argv[2], "w"))
PY
expect "predict reads ShardingPlan._serialize() output" 0 "recorded, not modelled: bounds_check_mode, stochastic_rounding" -- \
  "$perfcast" predict --system "$sys" --workload "$wl" --plan "$tmp/serialized.json" --json "$tmp/serialized_predict.json"
again=$(number iteration_time_s "$tmp/serialized_predict.json" '{')
[ -n "$again" ] && awk -v a="$best" -v b="$again" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-9 * a) }' && echo "ok   the same time from the serialized plan" \
  || { echo "FAIL serialized plan predicts $again s, search said $best s"; fails=$((fails + 1)); }
# output_dtype is modelled: FP16 outputs halve the pooled all-to-all bytes, so the same plan
# is never slower with them.
sed 's/"output_dtype": "FP32"/"output_dtype": "FP16"/g' "$tmp/serialized.json" > "$tmp/serialized_fp16.json"
"$perfcast" -q predict --system "$sys" --workload "$wl" --plan "$tmp/serialized_fp16.json" --json "$tmp/fp16_predict.json" > /dev/null
half=$(number iteration_time_s "$tmp/fp16_predict.json" '{')
[ -n "$half" ] && awk -v a="$again" -v b="$half" 'BEGIN { exit !(b <= a && b > 0) }' && echo "ok   FP16 outputs: $half s, not slower than FP32's $again s" \
  || { echo "FAIL FP16 outputs predict $half s against FP32's $again s"; fails=$((fails + 1)); }
# Across 4 DGX H100 nodes the pooled all-to-all is on the critical path (DLRM MLPerf,
# table-wise): FP16 outputs make the iteration faster.
c4=$src/configs/systems/cluster_4x_dgx_h100.json
mlperf=$src/configs/workloads/dlrm_mlperf.json
"$perfcast" -q shard --system "$c4" --workload "$mlperf" --evaluations 5 --plan-format torchrec_serialized --out "$tmp/c4_fp32.json" > /dev/null
python3 -c "
import json, sys
p = json.load(open(sys.argv[1]))
for tables in p['plan'].values():
    for t in tables.values():
        t['output_dtype'] = 'FP16'
json.dump(p, open(sys.argv[2], 'w'))" "$tmp/c4_fp32.json" "$tmp/c4_fp16.json"
for dt in fp32 fp16; do
  "$perfcast" -q predict --system "$c4" --workload "$mlperf" --plan "$tmp/c4_$dt.json" --json "$tmp/c4_${dt}_predict.json" > /dev/null
done
t32=$(number iteration_time_s "$tmp/c4_fp32_predict.json" '{'); t16=$(number iteration_time_s "$tmp/c4_fp16_predict.json" '{')
[ -n "$t16" ] && awk -v a="$t32" -v b="$t16" 'BEGIN { exit !(b < a && b > 0) }' && echo "ok   4 nodes: FP16 outputs $t16 s, faster than FP32's $t32 s" \
  || { echo "FAIL 4 nodes: FP16 outputs $t16 s, FP32 $t32 s"; fails=$((fails + 1)); }
"$perfcast" -q convert-plan --system "$c4" --workload "$mlperf" --plan "$tmp/c4_fp16.json" --plan-format perfcast --out "$tmp/c4_flat.json" > /dev/null
"$perfcast" -q predict --system "$c4" --workload "$mlperf" --plan "$tmp/c4_flat.json" --json "$tmp/c4_flat_predict.json" > /dev/null
tflat=$(number iteration_time_s "$tmp/c4_flat_predict.json" '{')
grep -q '"output_dtype": "FP16"' "$tmp/c4_flat.json" && [ "$tflat" = "$t16" ] && echo "ok   perfcast's format carries output_dtype (the same $tflat s)" \
  || { echo "FAIL perfcast's format: $tflat s against $t16 s"; fails=$((fails + 1)); }

expect "shard --module-path" 0 "" -- "$perfcast" shard --system "$sys" --workload "$wl" --evaluations 5 \
  --plan-format torchrec --module-path model.sparse.ebc --out "$tmp/module_plan.json"
python3 -c "import json,sys; p=json.load(open(sys.argv[1])); assert list(p) == ['model.sparse.ebc'], list(p)" "$tmp/module_plan.json" \
  && echo "ok   the tables under the module path asked for" || { echo "FAIL module path"; fails=$((fails + 1)); }
expect "a module path that is not one" 2 "--module-path" -- "$perfcast" shard --system "$sys" --workload "$wl" --evaluations 5 \
  --plan-format torchrec --module-path "a/b" --out "$tmp/out.json"

# convert-plan: a TorchRec plan read and written back in its own shape is the same JSON value
# (asdict and _serialize() shapes), under the module path of the user's choice when asked.
same_json() {  # NAME A B [MODULE]: A == B as JSON values (with MODULE: B's tables all under MODULE)
  python3 - "$2" "$3" "${4:-}" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
if sys.argv[3]:
    merged = {}
    for tables in (b["plan"] if "plan" in b else b).values():
        merged.update(tables)
    b = {"plan": {sys.argv[3]: merged}} if "plan" in b else {sys.argv[3]: merged}
sys.exit(0 if a == b else 1)
PY
  [ $? = 0 ] && echo "ok   $1" || { echo "FAIL $1: $2 differs from $3"; fails=$((fails + 1)); }
}
expect "convert-plan writes an asdict plan back" 0 "" -- "$perfcast" convert-plan --system "$sys" --workload "$wl" \
  --plan "$tmp/torchrec_plan.json" --out "$tmp/asdict_back.json"
same_json "asdict plan round trip" "$tmp/asdict_back.json" "$tmp/torchrec_plan.json"
expect "convert-plan writes a _serialize() plan back" 0 "written as torchrec_serialized" -- "$perfcast" convert-plan --system "$sys" \
  --workload "$wl" --plan "$tmp/serialized.json" --out "$tmp/serialized_back.json"
same_json "_serialize() plan round trip, recorded fields kept" "$tmp/serialized_back.json" "$tmp/serialized.json"
expect "convert-plan --module-path" 0 "" -- "$perfcast" convert-plan --system "$sys" --workload "$wl" \
  --plan "$tmp/serialized.json" --module-path my_model.sparse.ebc --out "$tmp/moved.json"
same_json "the tables moved under the module path, unchanged" "$tmp/moved.json" "$tmp/serialized.json" my_model.sparse.ebc
expect "convert-plan to perfcast's format and back" 0 "" -- "$perfcast" convert-plan --system "$sys" --workload "$wl" \
  --plan "$tmp/torchrec_plan.json" --plan-format perfcast --out "$tmp/flat.json"
expect "... and back to TorchRec's" 0 "" -- "$perfcast" convert-plan --system "$sys" --workload "$wl" \
  --plan "$tmp/flat.json" --plan-format torchrec --out "$tmp/flat_back.json"
same_json "perfcast's format carries a TorchRec plan" "$tmp/flat_back.json" "$tmp/torchrec_plan.json"
expect "convert-plan: a plan for another system" 2 "rank" -- "$perfcast" convert-plan --system "$sys" --workload "$wl" \
  --plan "$tmp/torchrec_plan.json" --set system.gpus_per_node=2 --out "$tmp/out.json"

echo "$fails failure(s)"
[ "$fails" = 0 ]
