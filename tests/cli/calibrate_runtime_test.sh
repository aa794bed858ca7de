#!/usr/bin/env bash
# calibrate runtime: recovers a host cost per op from runs predicted with it (DLRM on the
# system's own CPU scale, a Transformer on its base profile's CPU), writes a profile that
# predict uses, refuses a fit worse than the base on the held-out runs, and rejects bad
# measurement files with exit 2 naming the line.
# Usage: calibrate_runtime_test.sh PERFCAST_BINARY SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
h100=$src/configs/systems/dgx_h100.json
mkdir -p "$tmp/configs/workloads" "$tmp/configs/runtimes"
cp "$src/configs/workloads/dlrm_default.json" "$src/configs/workloads/gpt2.json" "$src/configs/workloads/gpt3_1.3b.json" "$tmp/configs/workloads/"
cp "$src/configs/runtimes/pytorch_eager.json" "$src/configs/runtimes/megatron_deepspeed.json" "$tmp/configs/runtimes/"
cd "$tmp" || exit 1
time_of() { "$perfcast" predict --system "$h100" --json - "$@" 2> /dev/null | grep -o '"iteration_time_s": [0-9.e+-]*' | head -1 | awk '{print $2}'; }
near() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { d = a / b - 1; if (d < 0) d = -d; exit !(d <= tol) }'; }

# Six DLRM runs "measured" as perfcast predicts them with 123 us per op (every third held out).
{
  echo "workload,measured,set"
  for b in 1024 2048 4096 8192 16384 32768; do
    echo "configs/workloads/dlrm_default.json,$(time_of --workload configs/workloads/dlrm_default.json --set workload.batch_size=$b \
      --set runtime.host.op_overhead=123us),workload.batch_size=$b"
  done
} > runs.csv
"$perfcast" calibrate runtime --system "$h100" --measurements runs.csv --out configs/runtimes/mystack.json > fit.txt 2>&1
code=$?
fitted=$(python3 -c "import json; print(json.load(open('configs/runtimes/mystack.json'))['host']['op_overhead'].rstrip('us'))" 2> /dev/null)
check "DLRM: exit 0, 123 us per op recovered within 0.5% ($fitted us)" bash -c "test $code = 0 && [ -n '$fitted' ] && awk -v x='$fitted' 'BEGIN { exit !(x > 122.4 && x < 123.6) }'"
check "DLRM: 4 fit runs, 2 held out" grep -q "over pytorch_eager (4 fit runs, 2 held out)" fit.txt
check "DLRM: the base's held-out error printed" grep -q "^held-out runs: geomean |error| [0-9.]*% (with pytorch_eager as it is: [0-9.]*%)" fit.txt
check "DLRM: the host share printed (host-bound runs: well above 25%, no warning)" bash -c "grep -q 'the host cost adds [0-9]*% of their fitted time' fit.txt && ! grep -q 'mostly GPU-bound' fit.txt"
check "DLRM: the profile records its fit and the system's CPU" python3 -c "
import json; p = json.load(open('configs/runtimes/mystack.json')); f = p['fit']
assert f['cpu'] == 'Intel Xeon Platinum 8480C' and f['host_speed'] == 1.43, f
assert f['heldout_geomean_abs_error'] < 0.005 and 'runs.csv (6 runs)' in f['measured_on'], f
"
measured=$(sed -n 4p runs.csv | cut -d, -f2)
predicted=$(time_of --workload configs/workloads/dlrm_default.json --set runtime=mystack --set workload.batch_size=4096)
check "DLRM: predict with --set runtime=mystack matches a held-out run within 0.5%" near "$predicted" "$measured" 0.005
"$perfcast" predict --system "$h100" --workload configs/workloads/dlrm_default.json --set runtime=mystack > pred.txt 2>&1
check "DLRM: the headline names the fitted profile" grep -q "host (mystack, 0.0% held-out)" pred.txt

# Held-out runs that the base predicts exactly and the fit does not: refused, nothing written.
{
  echo "workload,measured,set,split"
  for b in 1024 2048; do
    echo "configs/workloads/dlrm_default.json,$(time_of --workload configs/workloads/dlrm_default.json --set workload.batch_size=$b \
      --set runtime.host.op_overhead=123us),workload.batch_size=$b,fit"
  done
  echo "configs/workloads/dlrm_default.json,$(time_of --workload configs/workloads/dlrm_default.json --set workload.batch_size=4096),workload.batch_size=4096,heldout"
} > worse.csv
"$perfcast" calibrate runtime --system "$h100" --measurements worse.csv --out configs/runtimes/worse.json > worse.txt 2>&1
code=$?
check "a fit worse than the base on held-out runs exits 1, nothing written" \
  bash -c "test $code = 1 && grep -q 'worse than pytorch_eager on the held-out runs' worse.txt && ! test -e configs/runtimes/worse.json"
"$perfcast" calibrate runtime --system "$h100" --measurements worse.csv --out configs/runtimes/worse.json --force > /dev/null 2>&1
check "--force writes it" test -e configs/runtimes/worse.json

# A Transformer on megatron_deepspeed (fitted on the EPYC 7742): op_overhead is on that CPU's
# scale, so the profile keeps its CPU and its backward cost.
{
  echo "workload,measured,set,split"
  for b in 64 128; do
    echo "configs/workloads/gpt2.json,$(time_of --workload configs/workloads/gpt2.json --set workload.global_batch=$b \
      --set runtime.host.op_overhead=200us),workload.global_batch=$b,fit"
  done
} > gpt.csv
"$perfcast" calibrate runtime --system "$h100" --measurements gpt.csv --out configs/runtimes/mygpt.json > gpt.txt 2>&1
check "Transformer: 200 us on the base's CPU recovered, its CPU and backward cost kept" python3 -c "
import json; p = json.load(open('configs/runtimes/mygpt.json'))
x = float(p['host']['op_overhead'].rstrip('us')); assert 199 < x < 201, x
assert p['host']['backward_op_overhead'] == '10us' and p['fit']['cpu'] == 'AMD EPYC 7742', p
"

# Runs no host cost per op explains (10 s per DLRM step: more than 10 ms per op) are refused.
printf 'workload,measured\nconfigs/workloads/dlrm_default.json,10s\nconfigs/workloads/dlrm_default.json,10.1s\n' > slow.csv
"$perfcast" calibrate runtime --system "$h100" --measurements slow.csv --out configs/runtimes/slow.json > /dev/null 2> err.txt
code=$?
check "runs beyond the grid's 10 ms per op: exit 1, nothing written" \
  bash -c "test $code = 1 && grep -q \"grid's end\" err.txt && ! test -e configs/runtimes/slow.json"
# Runs of different runtimes (DLRM: pytorch_eager, GPT-2: megatron_deepspeed) need --base.
{ echo "workload,measured"; echo "configs/workloads/dlrm_default.json,4ms"; echo "configs/workloads/gpt2.json,100ms"; } > mixed.csv
"$perfcast" calibrate runtime --system "$h100" --measurements mixed.csv --out configs/runtimes/mixed.json > /dev/null 2> err.txt
code=$?
check "runs of different runtimes: exit 2 naming the line and --base" \
  bash -c "test $code = 2 && grep -q 'line 3: this run.s runtime is megatron_deepspeed' err.txt && grep -q -- '--base' err.txt"
"$perfcast" calibrate runtime --system "$h100" --measurements runs.csv --out configs/runtimes/my.v2.json > /dev/null 2> err.txt
code=$?
check "an --out name that is not a runtime name exits 2" bash -c "test $code = 2 && ! test -e configs/runtimes/my.v2.json"

# GPU-bound runs measured 20% slower than predicted: the fit closes the gap with host cost
# and says so (the host cost adds little of the fitted time).
gpu_time=$(time_of --workload configs/workloads/gpt3_1.3b.json)
printf 'workload,measured\nconfigs/workloads/gpt3_1.3b.json,%s\n' "$(awk -v t="$gpu_time" 'BEGIN { print t * 1.2 }')" > gpu.csv
"$perfcast" calibrate runtime --system "$h100" --measurements gpu.csv --out configs/runtimes/gpu.json > gpu.txt 2>&1
check "GPU-bound runs: a warning that the host cost adds little and kernels may be slow" \
  bash -c "grep -q 'mostly GPU-bound' gpu.txt && grep -q 'calibrate the kernels first' gpu.txt"
# Output names are checked before the fit.
"$perfcast" calibrate runtime --system "$h100" --measurements runs.csv --out no_such_dir/x.json > /dev/null 2> err.txt
code=$?
check "--out in a missing folder: exit 2 before fitting" bash -c "test $code = 2 && grep -q 'no folder no_such_dir' err.txt"
"$perfcast" calibrate runtime --system "$h100" --measurements runs.csv --out configs/runtimes/dup.json --json configs/runtimes/dup.json > /dev/null 2> err.txt
code=$?
check "--out and --json naming one file: exit 2, nothing written" bash -c "test $code = 2 && ! test -e configs/runtimes/dup.json"

# Bad measurement files: exit 2 naming the line, nothing written.
printf '{"model": 5}\n' > configs/workloads/bad_model.json
printf 'workload,measured\nconfigs/workloads/bad_model.json,1ms\n' > bad_model.csv
printf 'workload,measured\nconfigs/workloads/dlrm_default.json,abc\n' > bad_time.csv
printf 'workload,time\nconfigs/workloads/dlrm_default.json,1ms\n' > bad_header.csv
printf 'workload,measured,split\nconfigs/workloads/dlrm_default.json,1ms,train\n' > bad_split.csv
printf 'workload,measured\nconfigs/workloads/missing.json,1ms\n' > bad_workload.csv
printf 'workload,measured\nconfigs/workloads/dlrm_default.json,1e-300\n' > tiny_time.csv
for f in bad_time:"line 2: measured" tiny_time:"line 2: measured \"1e-300\": expected an iteration time from 1us to a day" bad_header:"line 1: no \"measured\" column" bad_split:"line 2: split \"train\"" bad_workload:"line 2: cannot predict" bad_model:"/model"; do
  name=${f%%:*}
  want=${f#*:}
  "$perfcast" calibrate runtime --system "$h100" --measurements "$name.csv" --out "configs/runtimes/$name.json" > /dev/null 2> err.txt
  code=$?
  check "$name: exit 2 naming the line" bash -c "test $code = 2 && grep -qF '$want' err.txt && ! test -e configs/runtimes/$name.json"
done

if [ "$fails" -gt 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all calibrate runtime tests passed"
