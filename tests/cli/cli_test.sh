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

if [ "$fails" -gt 0 ]; then echo "$fails CLI test(s) failed"; exit 1; fi
echo "all CLI tests passed"
