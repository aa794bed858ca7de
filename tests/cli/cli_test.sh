#!/usr/bin/env bash
# Command-line behaviour: exit codes, messages that name file and JSON path, and no
# output file written on bad input. Usage: cli_test.sh PERFCAST_BINARY SOURCE_DIR
set -u
perfcast=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
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

# calibrate kernels: 30 streaming-kernel measurements with a known 90% of HBM and 3 us.
awk 'BEGIN { for (i = 1; i <= 30; i++) { n = i * 100000; t = 3 + n * 12 / (3.35e12 * 0.9) * 1e6;
  printf "{\"schema\":\"perfcast.measurement\",\"schema_version\":\"1.0\",\"kernel\":{\"family\":\"elementwise\",\"op\":\"add\",\"elements\":%d,\"flops_per_element\":1,\"bytes_per_element\":12},\"timing\":{\"timer\":\"cupti\",\"repetitions\":3,\"median\":\"%.6fus\"},\"device\":{\"name\":\"test GPU\"}}\n", n, t } }' > "$tmp/m.jsonl"
expect "calibrate kernels" 0 "elementwise" -- "$perfcast" calibrate kernels --system "$src/configs/systems/h100_sxm.json" --measurements "$tmp/m.jsonl" --out "$tmp/cal.json"
grep -q '"memory_efficiency": 0.899999' "$tmp/cal.json" && grep -q '"overhead": "3.0000us"' "$tmp/cal.json" && echo "ok   calibration file written" || { echo "FAIL calibration file"; fails=$((fails + 1)); }
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

# trace-stats and replay on the hand-written Kineto fixtures (tests/data/kineto_*.json).
k0=$src/tests/data/kineto_rank0.json
k1=$src/tests/data/kineto_rank1.json
expect "trace-stats" 0 "exposed" -- "$perfcast" trace-stats "$src/tests/data/kineto_two_steps.json"
expect "trace-stats json" 0 '"clock_offset_s": 0.001,' -- "$perfcast" trace-stats "$k0" "$k1" --json -
expect "replay" 0 "|error| over ranks: geomean 0.53%, max 0.56%" -- "$perfcast" replay --kineto "$k0" "$k1" --json "$tmp/out.json"
grep -q '"simulated_s": 0.000179' "$tmp/out.json" && grep -q '"context"' "$tmp/out.json" && echo "ok   replay json written" \
  || { echo "FAIL replay json"; fails=$((fails + 1)); }
printf '{"traceEvents": [' > "$tmp/broken_trace.json"
expect "replay broken trace" 2 'broken_trace.json: /: invalid JSON at byte' -- "$perfcast" replay --kineto "$tmp/broken_trace.json" --json "$tmp/out.json"
expect "replay duplicate rank" 2 '/distributedInfo/rank: rank 0 is also the rank of' -- "$perfcast" replay --kineto "$k0" "$k0" --json "$tmp/out.json"
expect "trace-stats missing file" 2 'cannot open the file' -- "$perfcast" trace-stats "$tmp/nope.json" --json "$tmp/out.json"

if [ "$fails" -gt 0 ]; then echo "$fails CLI test(s) failed"; exit 1; fi
echo "all CLI tests passed"
