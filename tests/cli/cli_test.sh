#!/usr/bin/env bash
# Command-line behaviour: exit codes, messages that name file and JSON path, and no
# output file written on bad input. Usage: cli_test.sh PERFCAST_BINARY SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
sys=$src/configs/systems/dgx_h100.json
wl=$src/configs/workloads/dlrm_default.json

# expect NAME CODE PATTERN -- command...: the exit code and a stderr pattern; no --json file left.
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  rm -f "$tmp/out.json" "$tmp/trace.json"
  "$@" > "$tmp/stdout" 2> "$tmp/stderr"
  local got=$?
  if [ "$got" != "$code" ]; then
    echo "FAIL $name: exit $got, expected $code"; cat "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -qF -- "$pattern" "$tmp/stderr" "$tmp/stdout"; then
    echo "FAIL $name: output lacks '$pattern'"; cat "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if [ "$code" = 2 ] && { [ -e "$tmp/out.json" ] || [ -e "$tmp/trace.json" ] || ls "$tmp"/*.tmp* > /dev/null 2>&1; }; then
    echo "FAIL $name: wrote a file on bad input"; fails=$((fails + 1)); return
  fi
  echo "ok   $name"
}

mk() {  # mk NAME: copy the DGX H100 system with a jq-free edit by sed
  sed "$2" "$sys" > "$tmp/$1.json"
  # keep the GPU reference resolvable from the temporary folder
  cp "$src/configs/systems/h100_sxm.json" "$tmp/h100_sxm.json"
}

expect "predict succeeds" 0 "predicted iteration time" -- "$perfcast" predict --system "$sys" --workload "$wl" --json "$tmp/out.json" --trace "$tmp/trace.json"
[ -s "$tmp/out.json" ] && grep -q '"iteration_time_s"' "$tmp/out.json" && grep -q '"traceEvents"' "$tmp/trace.json" \
  && echo "ok   json and trace written" || { echo "FAIL json/trace not written"; fails=$((fails + 1)); }
expect "json to stdout" 0 '"context"' -- "$perfcast" predict --system "$sys" --workload "$wl" --json -

mk unknown_key 's/"nvls": true/"nvsl": true/'
expect "unknown key suggests" 2 '/intra_node/nvsl: unknown key (did you mean "nvls"?)' -- "$perfcast" predict --system "$tmp/unknown_key.json" --workload "$wl" --json "$tmp/out.json"
mk missing_key 's/"gpus_per_node": 8,//'
expect "missing key" 2 'missing_key.json: /gpus_per_node: missing required key' -- "$perfcast" predict --system "$tmp/missing_key.json" --workload "$wl" --json "$tmp/out.json"
mk misspelt_key 's/"gpus_per_node": 8/"gpus_per_nod": 8/'
expect "misspelt required key" 2 'misspelt_key.json: /gpus_per_node: missing required key (the file has "gpus_per_nod" here: did you mean "gpus_per_node"?)' -- "$perfcast" predict --system "$tmp/misspelt_key.json" --workload "$wl" --json "$tmp/out.json"
# Files of another kind say what they are and which command takes them.
expect "kineto trace as workload" 2 'this is a PyTorch profiler (Kineto) trace: `perfcast import --kineto FILE' -- "$perfcast" predict --system "$sys" --workload "$src/tests/data/kineto_rank0.json" --json "$tmp/out.json"
expect "csv as workload" 2 'invalid JSON at line 1, column 1; this looks like a CSV table' -- "$perfcast" predict --system "$sys" --workload "$src/data/public-measurements/nccl_two_node_p5.csv" --json "$tmp/out.json"
expect "system as workload" 2 'expected schema "perfcast.workload", got "perfcast.system"; this is a perfcast system file: give it with --system' -- "$perfcast" predict --system "$sys" --workload "$sys" --json "$tmp/out.json"
expect "csv to report" 2 'this looks like a CSV table' -- "$perfcast" report "$src/data/public-measurements/nccl_two_node_p5.csv" --out "$tmp/out.json"
mk wrong_unit 's/"400Gb\/s"/"400Gb"/'
expect "wrong unit" 2 '/network/nic_bandwidth: expected a bandwidth such as "900GB/s"' -- "$perfcast" predict --system "$tmp/wrong_unit.json" --workload "$wl" --trace "$tmp/trace.json"
mk zero_gpus 's/"gpus_per_node": 8/"gpus_per_node": 0/'
expect "zero GPUs" 2 '/gpus_per_node: expected an integer in [1, 1024], got 0' -- "$perfcast" predict --system "$tmp/zero_gpus.json" --workload "$wl" --json "$tmp/out.json"
expect "negative size" 2 '/embedding/tables/0/rows: expected an integer in [1,' -- "$perfcast" predict --system "$sys" --workload "$wl" --set workload.embedding.tables[0].rows=-1 --json "$tmp/out.json"
mk negative_latency 's/"3us"/"-3us"/'
expect "negative time" 2 '/network/latency: expected a time such as "5us", got "-3us" (negative)' -- "$perfcast" predict --system "$tmp/negative_latency.json" --workload "$wl" --json "$tmp/out.json"
printf '{ "schema": ' > "$tmp/broken.json"
expect "broken JSON" 2 'broken.json: /: invalid JSON at line 1' -- "$perfcast" predict --system "$tmp/broken.json" --workload "$wl" --json "$tmp/out.json"
expect "missing file" 2 'cannot open the file' -- "$perfcast" predict --system "$tmp/nope.json" --workload "$wl"
expect "bad --set" 2 'expected PATH=VALUE' -- "$perfcast" predict --system "$sys" --workload "$wl" --set batch_size
expect "indivisible batch" 2 '/batch_size: the global batch 1001 does not divide over the system' -- "$perfcast" predict --system "$sys" --workload "$wl" --set workload.batch_size=1001 --json "$tmp/out.json"
expect "missing option" 2 '--workload is required' -- "$perfcast" predict --system "$sys"
expect "what-if batch" 0 "what-if: workload.batch_size=4096" -- "$perfcast" predict --system "$sys" --workload "$wl" --set workload.batch_size=4096
expect "comm" 0 "busbw GB/s" -- "$perfcast" comm --system "$sys" --collective all_reduce --sizes 1MB,1GB
expect "comm bad collective" 2 'did you mean "all_reduce"' -- "$perfcast" comm --system "$sys" --collective all_reduse
expect "list" 0 "gemm.spec_roofline" -- "$perfcast" list
# The systems with their sources: every new scale-out system is listed, with its fabric and sources.
for sysname in gb200_nvl72.json hgx_b200.json b200_sxm.json dgx_h100_superpod.json gcp_a3_mega.json aws_p5.json; do
  expect "list shows $sysname" 0 "$sysname" -- "$perfcast" list --systems "$src/configs/systems"
done
expect "list: GB200 NVL72 is one NVLink domain of 72 GPUs" 0 "NVLink domain of 72 GPUs" -- "$perfcast" list --systems "$src/configs/systems"
expect "list: a system's sources" 0 "source (topology): NVIDIA GB200 NVL72" -- "$perfcast" list --systems "$src/configs/systems"
expect "list: SuperPOD has SHARP" 0 "SHARP" -- "$perfcast" list --systems "$src/configs/systems"
expect "list: missing systems folder" 2 "expected a folder of system files" -- "$perfcast" list --systems "$tmp/no-such-folder"
# GB200 NVL72: a 72-GPU all-reduce stays in the rack's NVLink domain (no NIC is the bound).
expect "GB200 NVL72 72-GPU all-reduce in one NVLink domain" 0 "72 ranks on 18 node(s) in 1 NVLink domain(s)" -- "$perfcast" comm --system "$src/configs/systems/gb200_nvl72.json" --ranks 72 --sizes 1GiB

# calibrate kernels: 30 streaming-kernel measurements with a known 90% of HBM and 3 us.
awk 'BEGIN { for (i = 1; i <= 30; i++) { n = i * 100000; t = 3 + n * 12 / (3.35e12 * 0.9) * 1e6;
  printf "{\"schema\":\"perfcast.measurement\",\"schema_version\":\"1.0\",\"kernel\":{\"family\":\"elementwise\",\"op\":\"add\",\"elements\":%d,\"flops_per_element\":1,\"bytes_per_element\":12},\"timing\":{\"timer\":\"cupti\",\"repetitions\":3,\"median\":\"%.6fus\"},\"device\":{\"name\":\"test GPU\"}}\n", n, t } }' > "$tmp/m.jsonl"
expect "calibrate kernels" 0 "elementwise" -- "$perfcast" calibrate kernels --system "$src/configs/systems/h100_sxm.json" --measurements "$tmp/m.jsonl" --out "$tmp/cal.json"
python3 -c 'import json, sys; f = json.load(open(sys.argv[1]))["families"][0]; sys.exit(abs(f["memory_efficiency"] - 0.9) > 1e-6)' "$tmp/cal.json" && grep -q '"overhead": "3.0000us"' "$tmp/cal.json" && echo "ok   calibration file written" || { echo "FAIL calibration file"; fails=$((fails + 1)); }
echo '{"schema": "perfcast.measurement"' >> "$tmp/m.jsonl"
expect "calibrate bad line" 2 'm.jsonl line 31' -- "$perfcast" calibrate kernels --system "$src/configs/systems/h100_sxm.json" --measurements "$tmp/m.jsonl" --out "$tmp/cal2.json"
[ ! -e "$tmp/cal2.json" ] && echo "ok   nothing written on bad input" || { echo "FAIL wrote on bad input"; fails=$((fails + 1)); }

# perfcast profile: sweeps are validated first (exit 2), then no CUDA build / no device is exit 1.
expect "profile dry run" 0 "7223 cases in all" -- "$perfcast" profile --sweep "$src/configs/sweeps/gemm.json" --sweep "$src/configs/sweeps/elementwise.json" --sweep "$src/configs/sweeps/memcpy.json" --sweep "$src/configs/sweeps/embedding.json" --dry-run
printf '{"schema": "perfcast.sweep", "schema_version": "1.0", "name": "x", "generators": [{"type": "conv"}]}' > "$tmp/bad_sweep.json"
expect "profile bad sweep" 2 'bad_sweep.json: /generators/0/type' -- "$perfcast" profile --sweep "$tmp/bad_sweep.json" --out "$tmp/profile_out.jsonl"
if ! command -v nvidia-smi > /dev/null 2>&1; then
  expect "profile without a GPU" 1 "no CUDA" -- "$perfcast" profile --sweep "$src/configs/sweeps/memcpy.json" --out "$tmp/profile_out.jsonl"
  [ ! -e "$tmp/profile_out.jsonl" ] && echo "ok   profile wrote nothing" || { echo "FAIL profile wrote a file without a GPU"; fails=$((fails + 1)); }
fi

# perfcast run: inputs are validated first (exit 2); without CUDA ("this build has no CUDA") or
# without a device ("no CUDA device visible") it is exit 1 with one line naming what is missing.
expect "run missing workload" 2 'cannot open the file' -- "$perfcast" run --system "$src/configs/systems/h100_sxm.json" --workload "$tmp/nope.json" --json "$tmp/out.json"
if ! command -v nvidia-smi > /dev/null 2>&1; then
  expect "run without a GPU" 1 "error: perfcast run needs a CUDA GPU: " -- "$perfcast" run --system "$src/configs/systems/h100_sxm.json" --workload "$wl" --json "$tmp/out.json"
  [ ! -e "$tmp/out.json" ] && echo "ok   run wrote nothing" || { echo "FAIL run wrote a file without a GPU"; fails=$((fails + 1)); }
fi

# perfcast loads no CUDA library; its GPU commands run in perfcast-gpu beside it (cli/gpu_binary.hpp),
# which a build with CUDA adds: there, run without a device reaches it and says what is missing.
if command -v ldd > /dev/null 2>&1; then
  if ldd "$perfcast" | grep -qE 'libcuda|libcudart|libcublas|libcupti|libnccl'; then
    echo "FAIL perfcast links a CUDA library:"; ldd "$perfcast" | grep -E 'cuda|cublas|cupti|nccl'; fails=$((fails + 1))
  else
    echo "ok   perfcast links no CUDA library"
  fi
fi
if [ -x "$(dirname "$perfcast")/perfcast-gpu" ] && ! command -v nvidia-smi > /dev/null 2>&1; then
  expect "run hands over to perfcast-gpu" 1 "perfcast run needs a CUDA GPU: no CUDA device visible" -- "$perfcast" run --system "$src/configs/systems/h100_sxm.json" --workload "$wl" --json "$tmp/out.json"
elif [ ! -x "$(dirname "$perfcast")/perfcast-gpu" ]; then
  expect "run without perfcast-gpu" 1 "this build has no CUDA (perfcast-gpu" -- "$perfcast" run --system "$src/configs/systems/h100_sxm.json" --workload "$wl" --json "$tmp/out.json"
fi

# trace-stats and replay on the hand-written Kineto fixtures (tests/data/kineto_*.json).
k0=$src/tests/data/kineto_rank0.json
k1=$src/tests/data/kineto_rank1.json
expect "trace-stats" 0 "exposed" -- "$perfcast" trace-stats "$src/tests/data/kineto_two_steps.json"
expect "trace-stats json" 0 '"clock_offset_s": 0.001,' -- "$perfcast" trace-stats "$k0" "$k1" --json -
expect "replay" 0 "|error| over ranks: geomean 0.53%, max 0.56%" -- "$perfcast" replay --kineto "$k0" "$k1" --json "$tmp/out.json"
grep -q '"simulated_s": 0.000179' "$tmp/out.json" && grep -q '"context"' "$tmp/out.json" && echo "ok   replay json written" \
  || { echo "FAIL replay json"; fails=$((fails + 1)); }
printf '{"traceEvents": [' > "$tmp/broken_trace.json"
expect "replay broken trace" 2 'broken_trace.json: /: invalid JSON at line' -- "$perfcast" replay --kineto "$tmp/broken_trace.json" --json "$tmp/out.json"
expect "replay duplicate rank" 2 '/distributedInfo/rank: rank 0 is also the rank of' -- "$perfcast" replay --kineto "$k0" "$k0" --json "$tmp/out.json"
expect "trace-stats missing file" 2 'cannot open the file' -- "$perfcast" trace-stats "$tmp/nope.json" --json "$tmp/out.json"
# replay --kernels predicted, execution traces and import (tests/data/kineto_shapes.json, et_shapes.json).
ks=$src/tests/data/kineto_shapes.json
v100=$src/configs/systems/dgx1_v100.json
expect "replay predicted" 0 '"name": "embedding"' -- "$perfcast" replay --kineto "$ks" --et "$src/tests/data/et_shapes.json" --kernels predicted --system "$v100" --json -
expect "replay predicted needs a system" 2 '--kernels predicted needs --system' -- "$perfcast" replay --kineto "$ks" --kernels predicted --json "$tmp/out.json"
expect "replay et count" 2 '2 execution traces for 1 Kineto traces' -- "$perfcast" replay --kineto "$ks" --et "$src/tests/data/et_shapes.json" "$src/tests/data/et_shapes.json" --json "$tmp/out.json"
expect "import" 0 'not recognized (keep their measured duration): 1 ops' -- "$perfcast" import --kineto "$ks" --out "$tmp/imported.json"
expect "predict imported" 0 'imported trace: 1 traced rank' -- "$perfcast" predict --system "$v100" --workload "$tmp/imported.json"
# The same V100 trace on an H100 system: the unrecognized kernel keeps its V100 time, and the report says so.
expect "predict imported on another GPU warns" 0 'recorded on Tesla V100-SXM2-32GB and predicted on NVIDIA H100' -- \
  "$perfcast" predict --system "$sys" --workload "$tmp/imported.json"
"$perfcast" predict --system "$v100" --workload "$tmp/imported.json" > "$tmp/same_gpu.txt" 2>&1
! grep -q "recorded on" "$tmp/same_gpu.txt" && echo "ok   the same GPU gives no such warning" || { echo "FAIL same-GPU warning"; fails=$((fails + 1)); }
# An implausible measured step, and a trace with no GPU work at all, are said.
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
d['measured_iteration'] = ['7200s']
json.dump(d, open(sys.argv[2], 'w'))
d['collectives'] = []
for r in d['ranks']:
    for op in r['ops']:
        op.pop('kernels', None); op.pop('collective', None)
json.dump(d, open(sys.argv[3], 'w'))" "$tmp/imported.json" "$tmp/long_step.json" "$tmp/no_gpu.json"
expect "imported: implausible step warns" 0 "measured step of 7200.000 s is implausible" -- "$perfcast" predict --system "$v100" --workload "$tmp/long_step.json"
expect "imported: no GPU work warns" 0 "no GPU kernel, copy or collective" -- "$perfcast" predict --system "$v100" --workload "$tmp/no_gpu.json"
# --calibration names a kernel calibration; a missing one is bad input.
expect "predict --calibration" 0 '"calibration": "'"$src"'/configs/calibration/tesla_v100_sxm2_32gb.json"' -- \
  "$perfcast" predict --system "$src/configs/systems/h100_sxm.json" --workload "$wl" \
  --calibration "$src/configs/calibration/tesla_v100_sxm2_32gb.json" --json -
expect "predict --calibration missing" 2 '/kernel_calibration: no such file' -- \
  "$perfcast" predict --system "$sys" --workload "$wl" --calibration "$tmp/nope.json" --json "$tmp/out.json"
expect "import bad et" 2 'broken.json' -- "$perfcast" import --kineto "$ks" --et "$src/tests/data/broken.json" --out "$tmp/out.json"
# Kernel measurements from a trace (5 recognized ops of calibratable families in
# kineto_shapes.json), selections, and a fit that needs 10 per family.
expect "replay measurements" 0 'selected (ranks 0, steps 1)' -- "$perfcast" replay --kineto "$ks" --ranks 0 --steps 1 --measurements-out "$tmp/m.jsonl"
[ "$(grep -c '"timer":"kineto"' "$tmp/m.jsonl")" = 5 ] && echo "ok   replay measurements: 5 lines" \
  || { echo "FAIL replay measurements: expected 5 kineto lines"; fails=$((fails + 1)); }
expect "replay measurements bad ranks" 2 'expected a comma-separated list' -- "$perfcast" replay --kineto "$ks" --ranks 3-1 --measurements-out "$tmp/out.json"
expect "replay measurements empty selection" 2 'no recognized op of a calibratable family' -- "$perfcast" replay --kineto "$ks" --ranks 5 --measurements-out "$tmp/out.json"
expect "replay calibration needs predicted" 2 '--calibration is used only with --kernels predicted' -- "$perfcast" replay --kineto "$ks" --calibration "$tmp/m.jsonl" --json "$tmp/out.json"
expect "calibrate kernels too few" 2 'no kernel family has the 10 measurements' -- "$perfcast" calibrate kernels --system "$v100" --measurements "$tmp/m.jsonl" --out "$tmp/out.json"

# index-stats on hand-built raw arrays (int32 little-endian): T=2 tables, B=3 bags.
i32() { for v in "$@"; do printf "\\x$(printf %02x $((v & 255)))\\x$(printf %02x $(((v >> 8) & 255)))\\x00\\x00"; done; }
i32 5 5 7 5 0 1 1 1 1 1 2 > "$tmp/idx.bin"
i32 0 3 4 4 6 10 11 > "$tmp/off.bin"
i32 0 3 2 4 6 10 11 > "$tmp/off_bad.bin"
i32 0 3 4 4 6 > "$tmp/off_short.bin"
ix=(index-stats --indices "$tmp/idx.bin" --tables 2 --batch 3 --dtype int32)
expect "index-stats" 0 "reuse_histogram(mean_reuse=" -- "$perfcast" "${ix[@]}" --offsets "$tmp/off.bin"
expect "index-stats as distribution" 0 '"kind": "zipf"' -- "$perfcast" "${ix[@]}" --offsets "$tmp/off.bin" --rows 8 --as-distribution --json -
expect "index-stats offsets decrease" 2 'off_bad.bin: entry 2: offsets must not decrease' -- "$perfcast" "${ix[@]}" --offsets "$tmp/off_bad.bin" --json "$tmp/out.json"
expect "index-stats offsets size" 2 'off_short.bin: /: 5 offsets do not fit 2 tables x batch 3' -- "$perfcast" "${ix[@]}" --offsets "$tmp/off_short.bin" --json "$tmp/out.json"
expect "index-stats index beyond rows" 2 'idx.bin: entry 2: index 7 of table 0 (batch 0) is outside [0, 6)' -- "$perfcast" "${ix[@]}" --offsets "$tmp/off.bin" --rows 6 --json "$tmp/out.json"
expect "index-stats int64 misread" 2 'idx.bin: /: 44 bytes is not a whole number of 8-byte (int64) values' -- "$perfcast" index-stats --indices "$tmp/idx.bin" --offsets "$tmp/off.bin" --tables 2 --batch 3 --json "$tmp/out.json"
expect "index-stats needs offsets" 2 'needs --offsets FILE or --lengths FILE' -- "$perfcast" "${ix[@]}" --json "$tmp/out.json"
printf 'table,rows,batch,accesses\nx,1,1,1\n' > "$tmp/stats.csv"
expect "index-stats bad csv" 2 'stats.csv: line 1: the header lacks column "unique_rows"' -- "$perfcast" index-stats --stats "$tmp/stats.csv" --json "$tmp/out.json"
loc=$src/data/dlrm-datasets-locality/locality_stats_2022_t788_bs131072.txt
expect "index-stats locality" 0 "fbgemm_t788_bs131072_0.pt" -- "$perfcast" index-stats --locality "$loc" --dim 128 --system "$src/configs/systems/h100_sxm.json" --json "$tmp/loc_stats.json"
expect "index-stats reads its json" 0 "reuse_histogram(mean_reuse=13.01)" -- "$perfcast" index-stats --stats "$tmp/loc_stats.json"

# perfcast validate: the dry run needs no GPU; bad input is exit 2 and writes nothing; without
# a GPU (or without CUDA) a measuring run is exit 1 before writing anything; --summarize and
# --compare on hand-written fixtures (tests/data/validation_results_small.jsonl: errors
# +10%, -5%, +2% and a failed line -> geomean (0.1 x 0.05 x 0.02)^(1/3) = 4.64%).
h1=$src/configs/systems/h100_sxm.json
expect "validate dry run" 0 "#1   light" -- "$perfcast" validate --system "$h1" --configs 2 --seed 3 --dry-run --out-dir "$tmp/results"
[ ! -e "$tmp/results" ] && echo "ok   validate dry run wrote no results" || { echo "FAIL validate dry run wrote results"; fails=$((fails + 1)); }
"$perfcast" validate --system "$h1" --configs 2 --seed 3 --dry-run > "$tmp/dry2" 2>&1
cmp -s "$tmp/stdout" "$tmp/dry2" && echo "ok   validate dry run is deterministic" || { echo "FAIL validate dry run differs between runs"; fails=$((fails + 1)); }
expect "validate dry run json" 0 '"predicted_s"' -- "$perfcast" validate --system "$h1" --configs 1 --dry-run --json -
expect "validate bad system" 2 'wrong_unit.json: /network/nic_bandwidth' -- "$perfcast" validate --system "$tmp/wrong_unit.json" --configs 2 --out-dir "$tmp/results" --json "$tmp/out.json"
[ ! -e "$tmp/results" ] && echo "ok   validate wrote nothing on bad input" || { echo "FAIL validate wrote results on bad input"; fails=$((fails + 1)); }
expect "validate without --system" 2 "--system is required" -- "$perfcast" validate --configs 2 --dry-run
expect "validate bad --configs" 2 "configs" -- "$perfcast" validate --system "$h1" --configs 0 --dry-run
if ! command -v nvidia-smi > /dev/null 2>&1; then
  expect "validate without a GPU" 1 "needs the reference executor" -- "$perfcast" validate --system "$h1" --configs 2 --out-dir "$tmp/results"
  [ ! -e "$tmp/results" ] && echo "ok   validate wrote nothing without a GPU" || { echo "FAIL validate wrote results without a GPU"; fails=$((fails + 1)); }
fi
vr=$src/tests/data/validation_results_small.jsonl
expect "validate summarize" 0 "4.64% geomean |error|, MAPE 5.67%, max 10.00%, bias +2.33% (3 configs) on NVIDIA H100 80GB HBM3, 1 failed" -- "$perfcast" validate --summarize "$vr"
expect "validate summarize json" 0 '"geomean_abs_error": 0.0464' -- "$perfcast" validate --summarize "$vr" --json -
printf '{"schema": "perfcast.validation_result", "schema_version": "1.0", "measured_s": 0.001}\n' > "$tmp/bad_results.jsonl"
expect "validate summarize bad line" 2 'bad_results.jsonl line 1: /predicted_s: missing required key' -- "$perfcast" validate --summarize "$tmp/bad_results.jsonl" --json "$tmp/out.json"
expect "validate compare" 0 "(transformer)" -- "$perfcast" validate --compare "$src/tests/data/pytorch_results_small.jsonl" --system "$h1"
expect "validate compare needs one GPU" 2 '/gpus_per_node: the PyTorch benchmarks run on one GPU' -- "$perfcast" validate --compare "$src/tests/data/pytorch_results_small.jsonl" --system "$sys" --json "$tmp/out.json"

# Sharding: a searched two-node plan is read back by predict --plan; node-local types are checked.
c2=$src/configs/systems/cluster_4x_dgx_h100.json
expect "shard two nodes" 0 "best (search)" -- "$perfcast" shard --system "$c2" --set system.nodes=2 --workload "$wl" --evaluations 40 --out "$tmp/plan.json"
expect "predict searched plan" 0 "predicted iteration time" -- "$perfcast" predict --system "$c2" --set system.nodes=2 --workload "$wl" --plan "$tmp/plan.json"
{ printf '{"schema": "perfcast.plan", "schema_version": "1.0", "tables": {"table_0": {"sharding_type": "table_row_wise", "ranks": [7, 8]}'
  for t in 1 2 3 4 5 6 7; do printf ', "table_%s": {"sharding_type": "table_wise", "ranks": [%s]}' $t $t; done
  printf '}}\n'; } > "$tmp/twrw_plan.json"
expect "table_row_wise across nodes" 2 '/tables/table_0/ranks: table_row_wise shards must be on the ranks of one node' -- "$perfcast" predict --system "$c2" --set system.nodes=2 --workload "$wl" --plan "$tmp/twrw_plan.json" --json "$tmp/out.json"
twrw_ok=$(sed 's/"ranks": \[7, 8\]/"ranks": [0, 1]/' "$tmp/twrw_plan.json")
printf '%s\n' "$twrw_ok" > "$tmp/twrw_plan_one_node.json"
expect "sequence table: no table_row_wise (TorchRec has no sequence version)" 2 '/tables/table_0/sharding_type: table "table_0" is a sequence (EmbeddingCollection) table' -- "$perfcast" predict --system "$c2" --set system.nodes=2 --workload "$wl" --set 'workload.embedding.tables[0].sequence=true' --plan "$tmp/twrw_plan_one_node.json" --json "$tmp/out.json"
expect "sequence tables named in the header" 0 "8 embedding tables (8 sequence: unpooled, summed before the interaction)" -- "$perfcast" predict --system "$c2" --set system.nodes=2 --workload "$wl" --set 'workload.embedding.tables[0].sequence=true'
h1=$src/configs/systems/h100_sxm.json
mlperf=$src/configs/workloads/dlrm_mlperf.json
expect "shard infeasible in HBM explains" 1 "at least 2 such GPUs are needed" -- "$perfcast" shard --system "$h1" --workload "$mlperf" --evaluations 10 --memory-tiers off
expect "... and names host memory" 1 "with tables in host memory they could fit (shard --memory-tiers on)" -- "$perfcast" shard --system "$h1" --workload "$mlperf" --evaluations 10 --memory-tiers off
expect "shard puts tables in host memory when nothing fits in HBM" 0 "in host memory (" -- "$perfcast" shard --system "$h1" --workload "$mlperf" --evaluations 200
expect "shard infeasible with host memory explains" 1 "and 8.38 GiB of host memory" -- "$perfcast" shard --system "$h1" --set system.host_memory.capacity=10GB --workload "$mlperf" --evaluations 10
expect "shard --evaluations beyond its bound" 2 '--evaluations: 18446744073709551615: expected at most' -- "$perfcast" shard --system "$sys" --workload "$wl" --evaluations 18446744073709551615
expect "bad --memory-tiers" 2 "--memory-tiers" -- "$perfcast" shard --system "$h1" --workload "$mlperf" --evaluations 10 --memory-tiers maybe
expect "MoE header names the shared experts" 0 "mixture of experts: 64 experts + shared experts of width 2816, top-6" -- "$perfcast" predict --system "$src/configs/systems/dgx_h100.json" --workload "$src/configs/workloads/deepseek_moe_16b.json"
expect "MoE layer pattern of the wrong length" 2 '/moe/layer_freq: the pattern lists 28 layers, the model has 24' -- "$perfcast" predict --system "$src/configs/systems/dgx_h100.json" --workload "$src/configs/workloads/deepseek_moe_16b.json" --set workload.layers=24 --json "$tmp/out.json"
expect "MoE header says the experts and the active parameters" 0 "mixture of experts: 8 experts, top-2, all-to-all dispatcher, expert TP 1, balanced routing; 1.29e+10 of 4.67e+10 parameters active" -- "$perfcast" predict --system "$c2" --workload "$src/configs/workloads/mixtral_8x7b.json"
# --dense-layout search: one table search per dense layout; on DLRM default (a small bottom
# MLP) the data-parallel layout wins over running it on rank 0 for the whole batch.
expect "shard --dense-layout search compares both layouts" 0 "chosen: data_parallel" -- "$perfcast" shard --system "$c2" --workload "$wl" --evaluations 40 --dense-layout search --json "$tmp/dense.json"
expect "... and the JSON lists both" 0 "" -- python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['search']; assert d['dense_layout'] == 'data_parallel' and len(d['dense_layouts']) == 2 and d['dense_layouts'][1]['iteration_time_s'] > d['dense_layouts'][0]['iteration_time_s']" "$tmp/dense.json"
expect "shard --dense-layout hybrid records the override" 0 "workload.bottom_mlp_rank=0" -- "$perfcast" shard --system "$c2" --workload "$wl" --evaluations 20 --dense-layout hybrid --json -

if [ "$fails" -gt 0 ]; then echo "$fails CLI test(s) failed"; exit 1; fi
echo "all CLI tests passed"
