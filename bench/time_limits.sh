#!/usr/bin/env bash
# How close to its time limit each long command stops (docs/robustness.md, "Time limits").
# Usage: bench/time_limits.sh PERFCAST_BINARY
# For each case: the option, the limit, the wall-clock time of the whole command (GNU time's
# %e, start-up and output included), the overshoot, the exit status, and whether the
# overshoot is within the contract: the larger of 1 s and 10% of the limit.
set -u
perfcast=$(realpath "$1")
src=$(cd "$(dirname "$0")/.." && pwd)
sys=$src/configs/systems/dgx_h100.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gpt3=(--workload "$src/configs/workloads/gpt3_175b.json" --set system.nodes=16 --set workload.parallelism.tp=4
  --set workload.parallelism.pp=8 --set workload.parallelism.vp=12 --set workload.global_batch=256
  --set workload.micro_batch=1 --set runtime=megatron_core)
dlrm128=(--workload "$src/configs/workloads/dlrm_dcnv2_mlperf.json" --set system.nodes=16)

# run NAME LIMIT_S -- command...
run() {
  local name=$1 limit=$2
  shift 3
  /usr/bin/time -f "%e" -o "$tmp/time" "$@" > /dev/null 2> "$tmp/err"
  local rc=$?
  local wall
  wall=$(tail -1 "$tmp/time")
  python3 - "$name" "$limit" "$wall" "$rc" <<'PY'
import sys
name, limit, wall, rc = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
tolerance = max(1.0, 0.1 * limit)
over = wall - limit
print(f"| {name} | {limit:g} s | {wall:.2f} s | {over:+.2f} s | {rc} | {'yes' if over <= tolerance else 'NO'} |")
PY
}

echo "| command | limit | wall | over the limit | exit | within max(1 s, 10%) |"
echo "|---|---|---|---|---|---|"
run "predict GPT-3 175B recipe (7.7 s) --timeout 2s" 2 -- "$perfcast" predict --system "$sys" "${gpt3[@]}" --timeout 2s
run "predict --sweep vp=12,6,4,3 --timeout 5s --threads 1" 5 -- "$perfcast" predict --system "$sys" "${gpt3[@]}" \
  --sweep workload.parallelism.vp=12,6,4,3 --timeout 5s --threads 1
run "shard DLRM-DCNv2 on 128 GPUs --timeout 5s" 5 -- "$perfcast" shard --system "$sys" "${dlrm128[@]}" --timeout 5s
run "shard DLRM-DCNv2 on 128 GPUs --budget 3s" 3 -- "$perfcast" shard --system "$sys" "${dlrm128[@]}" --budget 3s
run "shard DLRM-DCNv2 on 128 GPUs --budget 10s --dense-layout search" 10 -- "$perfcast" shard --system "$sys" \
  "${dlrm128[@]}" --budget 10s --dense-layout search
run "plan Llama 3 70B on 64 GPUs, batch 512, --budget 2s" 2 -- "$perfcast" plan --system "$sys" \
  --workload "$src/configs/workloads/llama3_70b.json" --gpus 64 --set workload.global_batch=512 --budget 2s
run "plan GPT-3 175B recipe space on 128 GPUs --timeout 3s" 3 -- "$perfcast" plan --system "$sys" \
  --workload "$src/configs/workloads/gpt3_175b.json" --gpus 128 --set workload.global_batch=256 --vp 1,2,4,6,12 --timeout 3s
run "comm all_to_all, 512 nodes, 8B:1GiB --timeout 1s (watchdog)" 1 -- "$perfcast" comm --system "$sys" \
  --collective all_to_all --nodes 512 --sizes 8B:1GiB --timeout 1s
