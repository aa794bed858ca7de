#!/usr/bin/env bash
# Hostile input: every input the command line reads gets exit 2 with the file and place,
# nothing is written, nothing runs, and no command crashes, hangs or prints a NaN.
# Each case is one defect class of docs/robustness.md. Usage: hostile_input_test.sh PERFCAST SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
sys=$src/configs/systems/dgx_h100.json
one=$src/configs/systems/h100_sxm.json
wl=$src/configs/workloads/dlrm_default.json
data=$src/tests/data

# expect NAME CODE PATTERN -- command...: exit code (a time limit of 60 s: 124 is a hang),
# a pattern in stderr or stdout, and on exit 2 (bad input) or 3 (stopped by --timeout) no
# file left in $tmp/out, staging files included.
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  rm -rf "$tmp/out"; mkdir -p "$tmp/out"
  timeout 60 "$@" > "$tmp/stdout" 2> "$tmp/stderr"
  local got=$?
  if [ "$got" != "$code" ]; then
    echo "FAIL $name: exit $got, expected $code"; head -c 2000 "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -qF -- "$pattern" "$tmp/stderr" "$tmp/stdout"; then
    echo "FAIL $name: output lacks '$pattern'"; head -c 2000 "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if grep -qiE -- '(^|[^a-z])-?nan|(^|[^a-z])inf([^a-z]|$)' "$tmp/stdout"; then
    echo "FAIL $name: printed a NaN or an infinity"; fails=$((fails + 1)); return
  fi
  if { [ "$code" = 2 ] || [ "$code" = 3 ]; } && [ -n "$(ls -A "$tmp/out")" ]; then
    echo "FAIL $name: wrote $(ls -A "$tmp/out") on bad input"; fails=$((fails + 1)); return
  fi
  echo "ok   $name"
}

# 1. Archive member names are never arguments to a program: a member named like a tar
#    option neither runs a command nor truncates a file.
echo keep > "$tmp/victim"
python3 - "$tmp" "$data/kineto_rank0.json" <<'PY'
import io, sys, tarfile
tmp, trace = sys.argv[1], sys.argv[2]
body = open(trace, 'rb').read()
for name, mode in (("evil.tar", "w"), ("evil.tar.gz", "w:gz")):
    with tarfile.open(f"{tmp}/{name}", mode) as t:
        for member in ("--use-compress-program=touch " + tmp + "/PWNED .json", "--index-file=" + tmp + "/victim", "--to-command=touch " + tmp + "/PWNED2;.json", "rank0.json"):
            info = tarfile.TarInfo(member); info.size = len(body); t.addfile(info, io.BytesIO(body))
PY
for a in evil.tar evil.tar.gz; do
  for cmd in trace-stats; do
    expect "archive $a: $cmd reads members in-process" 0 "" -- "$perfcast" $cmd "$tmp/$a"
  done
done
if [ -e "$tmp/PWNED" ] || [ -e "$tmp/PWNED2" ] || [ "$(cat "$tmp/victim")" != keep ]; then
  echo "FAIL archive member names ran a command or truncated a file"; fails=$((fails + 1))
else
  echo "ok   archive member names ran nothing and truncated nothing"
fi
printf '\x1f\x8b\x08\x00garbage' > "$tmp/broken.tar.gz"
expect "damaged archive" 2 "broken.tar.gz" -- "$perfcast" trace-stats "$tmp/broken.tar.gz"
expect "truncated gzip tar without an error message (found by fuzz_kineto)" 2 "fuzz_kineto_truncated_gzip_tar.tar.gz: /: not a tar archive" -- "$perfcast" trace-stats "$data/fuzz_kineto_truncated_gzip_tar.tar.gz"

# 2. Deep nesting: refused before parsing, naming line and column.
python3 -c "print('[' * 300000 + ']' * 300000)" > "$tmp/deep.json"
expect "deep system JSON" 2 "nest deeper than 128 levels" -- "$perfcast" predict --system "$tmp/deep.json" --workload "$wl"
python3 -c "print('{\"a\":' * 200000 + '1' + '}' * 200000)" > "$tmp/deep.jsonl"
expect "deep results JSONL" 2 "deep.jsonl line 1" -- "$perfcast" validate --system "$one" --compare "$tmp/deep.jsonl"

# 3. A long nccl-tests line: no regex recursion; the line limit names the line.
{ cat "$data/handwritten_all_reduce_perf.txt"; python3 -c "print('#' + 'a' * 70000)"; } > "$tmp/long_line.txt"
expect "nccl-tests line over the limit" 2 "long_line.txt: line" -- "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/long_line.txt" --out "$tmp/out/c.json"
{ head -5 "$data/handwritten_all_reduce_perf.txt"; python3 -c "print('# ' + '(' * 60000)"; tail -n +6 "$data/handwritten_all_reduce_perf.txt"; } > "$tmp/long_ok.txt"
expect "nccl-tests long line within the limit" 2 "sample(s); fitting needs at least 8" -- "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/long_ok.txt" --out "$tmp/out/c.json"

# 4. Unbounded allocation or reading.
expect "shard --budget 0s" 2 "expected a duration > 0" -- "$perfcast" shard --system "$sys" --workload "$wl" --budget 0s
expect "system /dev/zero" 2 "is a device" -- "$perfcast" predict --system /dev/zero --workload "$wl"

# 5. Values that would give NaN or infinite times.
# (h100_sxm.json holds its GPU inline; "5e-324GB/s" printed "-nan ns", "1e-300TB/s" a 300-digit time.)
for field in memory_bandwidth l2_bandwidth pcie_bandwidth; do
  for bw in 5e-324GB/s 1e-300TB/s 1e400GB/s 0GB/s; do
    expect "$field $bw" 2 "--set system.gpu.$field=\"$bw\": /gpu/$field: expected a bandwidth" -- "$perfcast" predict --system "$one" --workload "$wl" --set "system.gpu.$field=\"$bw\""
  done
done
expect "comm --sizes 1e308TiB" 2 "outside the supported range" -- "$perfcast" comm --system "$sys" --sizes 1e308TiB --json "$tmp/out/c.json"
expect "comm --sizes 8B:1e308TiB" 2 "--sizes" -- "$perfcast" comm --system "$sys" --sizes 8B:1e308TiB
for bad in nan inf -1024; do
  sed "s/^     1048576 /$(printf '%12s' "$bad") /" "$data/handwritten_all_reduce_perf.txt" > "$tmp/bad_$bad.txt"
  expect "nccl-tests size $bad" 2 "bad_$bad.txt: line" -- "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/bad_$bad.txt" --out "$tmp/out/c.json"
done

# 6. Integers that would overflow.
python3 - "$data/kineto_rank0.json" "$tmp/step.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for e in t["traceEvents"]:
    if str(e.get("name", "")).startswith("ProfilerStep#"): e["name"] = "ProfilerStep#999999999999999999999"
json.dump(t, open(sys.argv[2], "w"))
PY
expect "ProfilerStep# beyond int64" 2 "step number" -- "$perfcast" trace-stats "$tmp/step.json"

# 7. Library messages become exit 2 naming the place.
sed 's/"sm_count": 132/"sm_count": 1e400/' "$sys" > "$tmp/overflow.json"
expect "1e400 in a config" 2 "overflow.json" -- "$perfcast" predict --system "$tmp/overflow.json" --workload "$wl"
python3 - "$data/kineto_rank0.json" "$tmp/types.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["deviceProperties"] = [{"id": "zero", "name": 7}]
json.dump(t, open(sys.argv[2], "w"))
PY
expect "wrong JSON type in a trace" 2 "/deviceProperties/0/id" -- "$perfcast" trace-stats "$tmp/types.json"
echo '{"schema": 5, "measured_s": 1, "config": {}}' > "$tmp/types.jsonl"
expect "wrong JSON type in a results file" 2 "types.jsonl line 1: /schema" -- "$perfcast" validate --system "$one" --compare "$tmp/types.jsonl"
{ head -5 "$data/handwritten_all_reduce_perf.txt"; printf '# Rank  2 Group 0 Pid 1 on node01 device 2 [0x3] NVIDIA \xff\xfe\n'; tail -n +6 "$data/handwritten_all_reduce_perf.txt"; } > "$tmp/latin1.txt"
expect "invalid UTF-8 in a log" 2 "invalid UTF-8" -- "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/latin1.txt" --out "$tmp/out/c.json"
mkdir -p "$tmp/adir"
expect "directory as the system file" 2 "is a directory" -- "$perfcast" predict --system "$tmp/adir" --workload "$wl"
cp "$data/handwritten_all_reduce_perf.txt" "$tmp/AR_GPU99999999999999_x.csv"
printf 'size(B),count,type,time(ns)\n8,2,float,1000\n' > "$tmp/AR_GPU99999999999999_x.csv"
expect "huge number in a file name" 2 "GPU99999999999999" -- "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/AR_GPU99999999999999_x.csv" --out "$tmp/out/c.json"
expect "--set index past the end" 2 "--set" -- "$perfcast" predict --system "$sys" --workload "$wl" --set "workload.tables[99999999999999999999999].rows=5"

# 8. Outputs: all or nothing.
expect "--trace naming a directory" 2 "is a directory" -- "$perfcast" predict --system "$sys" --workload "$wl" --json "$tmp/out/p.json" --trace "$tmp/adir"
expect "two outputs on stdout" 2 "standard output" -- "$perfcast" predict --system "$sys" --workload "$wl" --json - --trace -

# 9. A one-GPU system with a one-GPU nccl-tests log (ranks forced to 2 before).
{ head -5 "$data/handwritten_all_reduce_perf.txt"; grep -v "Rank  1" "$data/handwritten_all_reduce_perf.txt" | tail -n +6; } > "$tmp/one_gpu.txt"
expect "calibrate comms on a one-GPU system" 2 "fitting needs at least 8" -- "$perfcast" calibrate comms --system "$one" --nccl-tests "$tmp/one_gpu.txt" --out "$tmp/out/c.json"

# 10. Sizes beyond the stated limits are refused before allocation.
expect "800,000 GPUs" 2 "at most 4096" -- "$perfcast" predict --system "$sys" --workload "$wl" --set system.nodes=100000
expect "comm --nodes 65536" 2 "at most 4096" -- "$perfcast" comm --system "$sys" --nodes 65536 --collective all_to_all

# 11. Refused with the file and what would work.
sed 's/node01 device  1/node02 device  1/' "$data/handwritten_all_reduce_perf.txt" > "$tmp/two_nodes.txt"
expect "2-node nccl-tests log with 3 sizes" 2 "two_nodes.txt: /: all_reduce (multi-node): 3 sample(s)" -- "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/two_nodes.txt" --out "$tmp/out/c.json"
expect "fewer than 8 sizes" 2 "handwritten_all_reduce_perf.txt: /: all_reduce (one node): 3 sample(s)" -- "$perfcast" calibrate comms --system "$sys" --nccl-tests "$data/handwritten_all_reduce_perf.txt" --out "$tmp/out/c.json"

# 12-15. Silent nonsense and unbounded work (docs/robustness.md).
sed 's/"measured_s": 0.001, "error": 0.1/"measured_s": 5e-324, "error": 0.1/' "$data/validation_results_small.jsonl" > "$tmp/subnormal.jsonl"
expect "validate --summarize: a subnormal measured time" 2 "subnormal.jsonl line 1: /measured_s: expected seconds in [1e-12, 1e+07]" -- "$perfcast" validate --summarize "$tmp/subnormal.jsonl"
printf '{"results": [{"bytes": 1024, "busbw_GBps": 5e-324, "time_us": 5e-324}]}' > "$tmp/subnormal_comm.json"
expect "report of a comm result with subnormal values ends" 0 "" -- "$perfcast" report "$tmp/subnormal_comm.json" --out "$tmp/out/r.html"
printf '{"ranks": [{"rank": 0, "measured_s": 1.7e308, "simulated_s": 1e-300}]}' > "$tmp/huge_replay.json"
expect "report of a replay result at the limits of a double ends" 0 "" -- "$perfcast" report "$tmp/huge_replay.json" --out "$tmp/out/r.html"
sed 's/"gpus_per_node": 8,/"gpus_per_node": 8, "gpus_per_node": 4,/' "$sys" > "$tmp/dup.json"
cp "$src/configs/systems/h100_sxm.json" "$src/configs/systems/hopper_nvswitch_8gpu.comms.json" "$tmp/"
expect "a key twice in one object" 2 "dup.json: /gpus_per_node: the key appears twice in one object" -- "$perfcast" predict --system "$tmp/dup.json" --workload "$wl"
{ printf '\xef\xbb\xbf'; cat "$src/data/vtrain-a100-gpt/AR_GPU8_1M_1024M_LUT.csv"; } > "$tmp/bom.csv"
expect "a CSV table with a byte-order mark is read as a table" 0 "all_reduce" -- "$perfcast" calibrate comms --system "$src/configs/systems/dgx_a100.json" --nccl-tests "$tmp/bom.csv" --collective all_reduce --ranks 8 --out "$tmp/out/bom.comms.json"
expect "calibrate runtime --measurements /dev/zero" 2 "/dev/zero" -- "$perfcast" calibrate runtime --system "$sys" --measurements /dev/zero --out "$tmp/out/x.json"

# 20-21. Search options checked before they divide; paths the system cannot look up.
expect "plan --cp 0" 2 "" -- "$perfcast" plan --system "$sys" --workload "$src/configs/workloads/gpt2.json" --cp 0
long=$tmp/$(python3 -c "print('a' * 300)")/$(python3 -c "print('b' * 5000)").json
expect "a path too long for the file system" 2 "File name too long" -- "$perfcast" predict --system "$long" --workload "$wl"
expect "a runtime profile path too long" 2 "" -- "$perfcast" predict --system "$sys" --workload "$wl" --set "runtime=\"$long\""

sizes=$(python3 -c "print(','.join(f'{1024 + i}B' for i in range(4096)))")
expect "comm all_to_all: 4,096 sizes on 512 nodes bounded before it starts" 2 "rank pairs to cost" -- "$perfcast" comm --system "$sys" --nodes 512 --collective all_to_all --sizes "$sizes"

# --timeout stops the search with the best plan so far.
expect "shard --timeout" 0 "stopped by --timeout" -- "$perfcast" shard --system "$sys" --workload "$wl" --budget 60s --timeout 200ms

# 22. Time limits on every command (docs/robustness.md): a single prediction cut between two
#     simulation steps, work that checks no limit ended by the watchdog, both exit 3 with
#     nothing written; searches and grids report what they finished. How close to the limit
#     each stops is measured by bench/time_limits.sh, not asserted here.
gpt3_recipe=(--set system.nodes=16 --set workload.parallelism.tp=4 --set workload.parallelism.pp=8
  --set workload.parallelism.vp=12 --set workload.global_batch=256 --set workload.micro_batch=1)
expect "predict --timeout: a single prediction cut at the limit" 3 "stopped by --timeout 200ms" -- \
  "$perfcast" predict --system "$sys" --workload "$src/configs/workloads/gpt3_175b.json" "${gpt3_recipe[@]}" \
  --timeout 200ms --json "$tmp/out/p.json" --csv "$tmp/out/p.csv"
expect "comm --timeout: the watchdog ends work that checks no limit" 3 "stopped by --timeout 1s" -- \
  "$perfcast" comm --system "$sys" --collective all_to_all --nodes 512 --sizes 8B:1GiB --timeout 1s --json "$tmp/out/c.json"
expect "predict --sweep --timeout: points not finished are not run" 0 "not run" -- \
  "$perfcast" predict --system "$sys" --workload "$src/configs/workloads/gpt3_175b.json" "${gpt3_recipe[@]}" \
  --sweep workload.parallelism.vp=12,6,4,3,2 --timeout 500ms --threads 1
# (exit 0 with those predicted in time ranked, also when none was; the five points take 2 s on
# a 2-core machine that predicts one in 0.7 s, so some are always left. The limit is named and
# nothing partial is written.)
timeout 60 "$perfcast" plan --system "$sys" --workload "$src/configs/workloads/llama3_70b.json" --gpus 64 \
  --set workload.global_batch=512 --budget 300ms > "$tmp/stdout" 2> "$tmp/stderr"
code=$?
if { [ "$code" = 0 ] && grep -q "not run" "$tmp/stdout"; } || { [ "$code" = 3 ] && grep -q "stopped by --budget 300ms" "$tmp/stderr"; }; then
  echo "ok   plan --budget: candidates not predicted in time are named (exit $code)"
else
  echo "FAIL plan --budget: exit $code"; head -c 2000 "$tmp/stderr"; fails=$((fails + 1))
fi
expect "--timeout on a command that finishes in time" 0 "" -- "$perfcast" list --timeout 30s
expect "--timeout on a nested command (calibrate comms)" 0 "wrote" -- "$perfcast" calibrate comms --system "$src/configs/systems/dgx_a100.json" \
  --nccl-tests "$src/data/vtrain-a100-gpt/AR_GPU8_1M_1024M_LUT.csv" --collective all_reduce --ranks 8 --out "$tmp/nested.comms.json" --timeout 60s
expect "--timeout 0s" 2 "expected a duration > 0" -- "$perfcast" trace-stats "$data/kineto_rank0.json" --timeout 0s

# 23. Names that are not UTF-8 (a Latin-1 file name) reach JSON outputs and traces as U+FFFD
#     (nlohmann's type_error.316 was exit 1).
cp "$sys" "$tmp/sys"$'\xfe'".json"
expect "a file name that is not UTF-8 in a JSON result" 0 "" -- "$perfcast" predict --system "$tmp/sys"$'\xfe'".json" \
  --workload "$wl" --json "$tmp/latin1_result.json" --trace "$tmp/latin1_trace.json"
if python3 -c "import json,sys; [json.load(open(f, encoding='utf-8')) for f in sys.argv[1:]]" \
    "$tmp/latin1_result.json" "$tmp/latin1_trace.json"; then
  echo "ok   the result and the trace are valid UTF-8 JSON"
else
  echo "FAIL a non-UTF-8 name made an invalid JSON output"; fails=$((fails + 1))
fi

# 24. Out of memory is exit 2 naming the inputs (it was exit 1 with std::bad_alloc). A 40 MB
#     trace needs ~12x its size to analyse; the address space is limited to 300 MB. Skipped
#     under AddressSanitizer, which reserves terabytes of address space at start.
if (ulimit -v 300000; "$perfcast" --version) > /dev/null 2>&1; then
  python3 - "$tmp/big_trace.json" <<'PY'
import json, sys
events = [{"ph": "X", "cat": "kernel", "name": "k%d" % i, "pid": 0, "tid": 7, "ts": i * 10, "dur": 5,
           "args": {"stream": 7, "correlation": i, "device": 0}} for i in range(220000)]
json.dump({"schemaVersion": 1, "deviceProperties": [], "traceEvents": events}, open(sys.argv[1], "w"))
PY
  expect "a trace too large for the memory free" 2 "big_trace.json: out of memory" -- \
    bash -c "ulimit -v 300000; exec \"\$0\" trace-stats \"\$1\"" "$perfcast" "$tmp/big_trace.json"
else
  echo "skip out of memory (the binary needs more address space: a sanitizer build)"
fi

if [ "$fails" != 0 ]; then echo "$fails hostile-input test(s) failed"; exit 1; fi
echo "all hostile-input tests passed"
