#!/usr/bin/env bash
# Runtime profiles: Transformers default to megatron_deepspeed (fitted host costs, named in
# the headline), --set runtime=NAME overrides, an unknown runtime exits 2 naming the folder,
# a workload naming its runtime is honoured, host costs given with --set win, --set errors
# name the override, a resized system's name says so, megatron_core's attention kernel follows the
# GPU's compute capability unless the workload names one. Usage: runtime_profiles_test.sh PERFCAST SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
sys=$src/configs/systems/dgx_a100.json
wl=$src/configs/workloads/gpt3_1.3b.json

time_of() { grep -o '"iteration_time_s": [0-9.e+-]*' "$1" | head -1 | awk '{print $2}'; }

"$perfcast" predict --system "$sys" --workload "$wl" --json "$tmp/default.json" > "$tmp/default.txt" 2>&1 || { echo "FAIL default predict"; fails=$((fails + 1)); }
grep -q "host (megatron_deepspeed, 4.4% held-out)" "$tmp/default.txt" && echo "ok   headline names the fitted runtime" \
  || { echo "FAIL headline"; cat "$tmp/default.txt"; fails=$((fails + 1)); }
grep -q '"basis": "megatron_deepspeed"' "$tmp/default.json" && echo "ok   JSON provenance names the runtime" \
  || { echo "FAIL JSON provenance"; fails=$((fails + 1)); }

"$perfcast" predict --system "$sys" --workload "$wl" --set runtime=pytorch_eager --json "$tmp/eager.json" > "$tmp/eager.txt" 2>&1 \
  || { echo "FAIL --set runtime"; fails=$((fails + 1)); }
grep -q "spec-derived: .*host" "$tmp/eager.txt" && echo "ok   pytorch_eager: host spec-derived" || { echo "FAIL eager headline"; cat "$tmp/eager.txt"; fails=$((fails + 1)); }
# 140 us per forward op instead of 10 us: the megatron_deepspeed prediction is slower.
awk -v a="$(time_of "$tmp/default.json")" -v b="$(time_of "$tmp/eager.json")" 'BEGIN { exit !(a > b) }' \
  && echo "ok   fitted host costs make the step slower than the defaults" || { echo "FAIL runtime had no effect"; fails=$((fails + 1)); }

"$perfcast" predict --system "$sys" --workload "$wl" --set runtime=no_such_stack --json "$tmp/out.json" > "$tmp/bad.txt" 2>&1
code=$?
[ "$code" = 2 ] && grep -q "no runtime profile \"no_such_stack\"" "$tmp/bad.txt" && [ ! -e "$tmp/out.json" ] \
  && echo "ok   unknown runtime exits 2, nothing written" || { echo "FAIL unknown runtime: exit $code"; cat "$tmp/bad.txt"; fails=$((fails + 1)); }

# A workload that names its runtime (copied beside a runtimes folder of its own).
mkdir -p "$tmp/configs/workloads" "$tmp/configs/runtimes"
cp "$src/configs/runtimes/pytorch_eager.json" "$tmp/configs/runtimes/"
sed 's/^{/{\n  "runtime": "pytorch_eager",/' "$wl" > "$tmp/configs/workloads/gpt.json"
"$perfcast" predict --system "$sys" --workload "$tmp/configs/workloads/gpt.json" --json "$tmp/named.json" > /dev/null 2>&1 \
  || { echo "FAIL named runtime"; fails=$((fails + 1)); }
[ "$(time_of "$tmp/named.json")" = "$(time_of "$tmp/eager.json")" ] && echo "ok   workload-named runtime honoured" \
  || { echo "FAIL named runtime differs from --set"; fails=$((fails + 1)); }

# Host costs from the command line win over the runtime profile and the system file.
"$perfcast" predict --system "$sys" --workload "$wl" --set runtime.host.op_overhead=140us --json "$tmp/same.json" > "$tmp/same.txt" 2>&1 \
  || { echo "FAIL runtime.host override"; cat "$tmp/same.txt"; fails=$((fails + 1)); }
[ "$(time_of "$tmp/same.json")" = "$(time_of "$tmp/default.json")" ] && echo "ok   runtime.host.op_overhead = the profile's value: same time" \
  || { echo "FAIL the profile's own value changed the time"; fails=$((fails + 1)); }
grep -q "set by --set: host" "$tmp/same.txt" && echo "ok   headline says the host costs were set by --set" \
  || { echo "FAIL headline of a host override"; cat "$tmp/same.txt"; fails=$((fails + 1)); }
"$perfcast" predict --system "$sys" --workload "$wl" --set system.host.op_overhead=400us --json "$tmp/slow.json" > /dev/null 2>&1 \
  || { echo "FAIL system.host override"; fails=$((fails + 1)); }
awk -v a="$(time_of "$tmp/slow.json")" -v b="$(time_of "$tmp/default.json")" 'BEGIN { exit !(a > b) }' \
  && echo "ok   system.host.op_overhead=400us (over the profile's 140 us) is slower" || { echo "FAIL system.host override had no effect"; fails=$((fails + 1)); }
"$perfcast" predict --system "$sys" --workload "$wl" --set runtime.host.op_overhed=1us > /dev/null 2> "$tmp/err"
code=$?
[ "$code" = 2 ] && grep -q 'did you mean "op_overhead"' "$tmp/err" && echo "ok   misspelt host key exits 2 with a suggestion" \
  || { echo "FAIL misspelt host key: exit $code"; cat "$tmp/err"; fails=$((fails + 1)); }

# Host costs follow the CPU: a fitted profile's values (fitted on the EPYC 7742, host speed
# 1.0) are divided by the system's host speed (DGX H100: 1.43). Hand-worked: 143 us on the
# fit's CPU is 100 us on DGX H100, as is 286 us with a host speed of 2.86; the backward
# 10 us (20 us in the third) becomes 6.99 us in all three.
h100=$src/configs/systems/dgx_h100.json
"$perfcast" predict --system "$h100" --workload "$wl" --json "$tmp/h100.json" > "$tmp/h100.txt" 2>&1
grep -q "host costs x0.70 for the CPU: fitted on AMD EPYC 7742, run on Intel Xeon Platinum 8480C" "$tmp/h100.txt" \
  && echo "ok   headline gives the CPU scaling" || { echo "FAIL CPU scaling headline"; cat "$tmp/h100.txt"; fails=$((fails + 1)); }
"$perfcast" predict --system "$h100" --workload "$wl" --set runtime.host.op_overhead=143us --json "$tmp/cpu_a.json" > /dev/null 2>&1
"$perfcast" predict --system "$h100" --workload "$wl" --set system.host.op_overhead=100us --json "$tmp/cpu_b.json" > /dev/null 2>&1
"$perfcast" predict --system "$h100" --workload "$wl" --set system.cpu.host_speed=2.86 --set runtime.host.op_overhead=286us \
  --set runtime.host.backward_op_overhead=20us --json "$tmp/cpu_c.json" > /dev/null 2>&1
same() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-9 * b) }'; }
same "$(time_of "$tmp/cpu_a.json")" "$(time_of "$tmp/cpu_b.json")" && same "$(time_of "$tmp/cpu_c.json")" "$(time_of "$tmp/cpu_b.json")" \
  && echo "ok   runtime host costs scale by fit speed / system speed (hand-worked)" \
  || { echo "FAIL CPU scaling: $(time_of "$tmp/cpu_a.json") $(time_of "$tmp/cpu_b.json") $(time_of "$tmp/cpu_c.json")"; fails=$((fails + 1)); }
sed 's/"cpu": { "model": "Intel Xeon Platinum 8480C", "sockets": 2,/"cpu": { "model": "Intel Xeon Platinum 8480C",/' \
  "$src/configs/systems/h100_sxm.json" > "$tmp/nocores.json"  # one GPU, its gpu block inline
"$perfcast" predict --system "$tmp/nocores.json" --workload "$wl" --json "$tmp/never.json" > /dev/null 2> "$tmp/err"
code=$?
[ "$code" = 2 ] && grep -q "/cpu/sockets" "$tmp/err" && [ ! -e "$tmp/never.json" ] && echo "ok   a cpu without sockets exits 2 naming /cpu/sockets, nothing written" \
  || { echo "FAIL cpu without sockets: exit $code"; cat "$tmp/err"; fails=$((fails + 1)); }

# torchrec (opt-in for DLRM): on its fit's own system (dgx1_v100, same CPU) the 495 us per op
# is not scaled and the headline names it, as extrapolated (its fit regime is batch 128); on DGX H100 it is scaled by 1.06 / 1.43; it makes the
# DLRM step slower than pytorch_eager's spec-derived costs.
v100=$src/configs/systems/dgx1_v100.json
dlrm=$src/configs/workloads/dlrm_default.json
"$perfcast" predict --system "$v100" --workload "$dlrm" --set runtime=torchrec --json "$tmp/trec.json" > "$tmp/trec.txt" 2>&1
"$perfcast" predict --system "$v100" --workload "$dlrm" --set runtime=pytorch_eager --set runtime.host.op_overhead=495us \
  --json "$tmp/trec_by_hand.json" > /dev/null 2>&1
"$perfcast" predict --system "$v100" --workload "$dlrm" --json "$tmp/dlrm_default_rt.json" > /dev/null 2>&1
grep -q "host (torchrec, extrapolated beyond its fit: global batch 2048 (fitted on 128-128))" "$tmp/trec.txt" && same "$(time_of "$tmp/trec.json")" "$(time_of "$tmp/trec_by_hand.json")" \
  && awk -v a="$(time_of "$tmp/trec.json")" -v b="$(time_of "$tmp/dlrm_default_rt.json")" 'BEGIN { exit !(a > 2 * b) }' \
  && echo "ok   torchrec: 495 us per op unscaled on its own CPU, named in the headline as extrapolated (batch 2048, fitted on 128), slower than the default" \
  || { echo "FAIL torchrec profile"; cat "$tmp/trec.txt"; fails=$((fails + 1)); }
# Inside its fit regime (PARAM's job: 8 V100, global batch 128, DLRM) the headline quotes the held-out error.
"$perfcast" predict --system "$v100" --workload "$src/configs/workloads/param_dlrm_v100.json" --plan "$src/bench/param_dlrm_v100_plan.json" \
  --set runtime=torchrec > "$tmp/trec_param.txt" 2>&1
grep -q "host (torchrec, 8.3% held-out)" "$tmp/trec_param.txt" && echo "ok   torchrec inside its fit regime quotes its held-out error" \
  || { echo "FAIL torchrec inside its regime"; cat "$tmp/trec_param.txt"; fails=$((fails + 1)); }
"$perfcast" predict --system "$h100" --workload "$dlrm" --set runtime=torchrec > "$tmp/trec_h100.txt" 2>&1
grep -q "host (torchrec, host costs x0.74 for the CPU: fitted on Intel Xeon E5-2698 v4" "$tmp/trec_h100.txt" \
  && echo "ok   torchrec on DGX H100: scaled by the CPUs' host speeds" || { echo "FAIL torchrec CPU scaling"; cat "$tmp/trec_h100.txt"; fails=$((fails + 1)); }

# Precisions a GPU lacks: tf32 on a V100 is fp32 with a warning (the same time), bf16 exits 2
# naming the key, nothing written.
"$perfcast" predict --system "$v100" --workload "$dlrm" --set workload.mlp_dtype=tf32 --json "$tmp/tf32.json" > "$tmp/tf32.txt" 2>&1
"$perfcast" predict --system "$v100" --workload "$dlrm" --json "$tmp/fp32.json" > /dev/null 2>&1
grep -q "has no TF32 tensor cores: mlp_dtype tf32 runs as fp32" "$tmp/tf32.txt" && same "$(time_of "$tmp/tf32.json")" "$(time_of "$tmp/fp32.json")" \
  && echo "ok   tf32 on a V100: predicted as fp32, with a warning" || { echo "FAIL tf32 on V100"; cat "$tmp/tf32.txt"; fails=$((fails + 1)); }
"$perfcast" predict --system "$v100" --workload "$dlrm" --set workload.mlp_dtype=bf16 --json "$tmp/bf16.json" > /dev/null 2> "$tmp/err"
code=$?
[ "$code" = 2 ] && grep -q "/mlp_dtype: Tesla V100-SXM2-32GB has no bf16 tensor cores" "$tmp/err" && [ ! -e "$tmp/bf16.json" ] \
  && echo "ok   bf16 on a V100 exits 2 naming /mlp_dtype, nothing written" || { echo "FAIL bf16 on V100: exit $code"; cat "$tmp/err"; fails=$((fails + 1)); }

# megatron_core: pipeline transfers stream-ordered instead of host-blocking (the same profile
# with host_blocking, same host constants): never slower with a pipeline.
pp=(--set workload.parallelism.pp=2 --set workload.parallelism.tp=1)
sed 's/"stream_ordered"/"host_blocking"/' "$src/configs/runtimes/megatron_core.json" > "$tmp/configs/runtimes/blocking_core.json"
"$perfcast" predict --system "$sys" --workload "$tmp/configs/workloads/gpt.json" "${pp[@]}" --set runtime=blocking_core --json "$tmp/blocking.json" > /dev/null 2>&1 \
  || { echo "FAIL blocking_core"; fails=$((fails + 1)); }
"$perfcast" predict --system "$sys" --workload "$tmp/configs/workloads/gpt.json" "${pp[@]}" --set runtime=megatron_core --json "$tmp/ordered.json" > /dev/null 2>&1 \
  || { echo "FAIL megatron_core"; fails=$((fails + 1)); }
awk -v a="$(time_of "$tmp/ordered.json")" -v b="$(time_of "$tmp/blocking.json")" 'BEGIN { exit !(a > 0 && a <= b) }' \
  && echo "ok   stream-ordered pipeline transfers are never slower than host-blocking ones" \
  || { echo "FAIL megatron_core slower than blocking: $(time_of "$tmp/ordered.json") vs $(time_of "$tmp/blocking.json")"; fails=$((fails + 1)); }
sed 's/"stream_ordered"/"sometimes"/' "$src/configs/runtimes/megatron_core.json" > "$tmp/configs/runtimes/bad_core.json"
"$perfcast" predict --system "$sys" --workload "$tmp/configs/workloads/gpt.json" --set runtime=bad_core > /dev/null 2> "$tmp/err"
code=$?
[ "$code" = 2 ] && grep -q "/pipeline_transfers" "$tmp/err" && echo "ok   a bad pipeline_transfers value exits 2 naming the key" \
  || { echo "FAIL bad pipeline_transfers: exit $code"; cat "$tmp/err"; fails=$((fails + 1)); }

# --set errors name the override; a resized system says so in its name.
"$perfcast" predict --system "$sys" --workload "$wl" --set workload.hiden=10 > /dev/null 2> "$tmp/err"
grep -q "^error: --set workload.hiden=10: /hiden: unknown key" "$tmp/err" && echo "ok   an unknown key given by --set names the --set" \
  || { echo "FAIL --set blame"; cat "$tmp/err"; fails=$((fails + 1)); }
"$perfcast" predict --system "$sys" --workload "$wl" --set system.nodes=3 > /dev/null 2> "$tmp/err"
grep -q "(with --set system.nodes=3)" "$tmp/err" && echo "ok   a consequence of overrides lists them" \
  || { echo "FAIL overrides not listed"; cat "$tmp/err"; fails=$((fails + 1)); }
"$perfcast" predict --system "$src/configs/systems/cluster_4x_dgx_h100.json" --workload "$wl" --set system.nodes=2 > "$tmp/resized.txt" 2>&1
head -1 "$tmp/resized.txt" | grep -q "\[--set nodes=2\] (2 x 8, 16 ranks)" && echo "ok   a resized system's name says so" \
  || { echo "FAIL resized name"; head -1 "$tmp/resized.txt"; fails=$((fails + 1)); }

# megatron_core's attention rule: cuDNN's fused attention on Hopper, FlashAttention-2 on the A100,
# printed with its reason and in the JSON; a workload's own kernel wins.
llama=$src/configs/workloads/llama3.1_8b.json
"$perfcast" predict --system "$src/configs/systems/dgx_h100.json" --workload "$llama" --json "$tmp/h100.json" > "$tmp/h100.txt" 2>&1
grep -q "attention kernel: cuDNN fused attention, as Transformer Engine runs it (runtime megatron_core on compute capability 9.0)" "$tmp/h100.txt" \
  && grep -q '"kernel": "cudnn"' "$tmp/h100.json" && echo "ok   megatron_core runs cuDNN's attention on an H100" \
  || { echo "FAIL attention kernel on H100"; grep -i attention "$tmp/h100.txt"; fails=$((fails + 1)); }
"$perfcast" predict --system "$src/configs/systems/dgx_a100.json" --workload "$llama" > "$tmp/a100.txt" 2>&1
grep -q "attention kernel: FlashAttention-2 (runtime megatron_core on compute capability 8.0)" "$tmp/a100.txt" \
  && echo "ok   megatron_core runs FlashAttention-2 on an A100" || { echo "FAIL attention kernel on A100"; fails=$((fails + 1)); }
"$perfcast" predict --system "$src/configs/systems/dgx_h100.json" --workload "$llama" --set workload.attention_kernel=flash2 > "$tmp/own.txt" 2>&1
grep -q "attention kernel: FlashAttention-2 (the workload's attention_kernel)" "$tmp/own.txt" \
  && echo "ok   the workload's attention kernel wins" || { echo "FAIL workload attention kernel"; fails=$((fails + 1)); }

[ "$fails" = 0 ] && echo "all runtime profile tests passed" || { echo "$fails failed"; exit 1; }
