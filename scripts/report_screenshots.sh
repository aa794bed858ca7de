#!/usr/bin/env bash
# Renders one `perfcast report` page per result kind with headless Chromium into
# docs/report-<kind>.png (the screenshots of docs/reports.md): predict, a predict grid
# (--sweep x --compare), plan, comm, shard, replay (the public PARAM DLRM traces),
# validation lines, kernels (the H200 PyTorch GEMM timings against their predictions),
# trace-stats (the PARAM DLRM traces), index-stats (the public DLRM locality statistics),
# calibrate (the two-node p5 nccl-tests tables) and profile (a dry run of the sweeps).
# Usage: scripts/report_screenshots.sh [BUILD_DIR [KIND...]]   (default build, every kind)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
shift || true
kinds=" $* "
perfcast=$build/cli/perfcast
chrome=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chrome" ] || { echo "needs chromium (apt-get install chromium)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src"
sys=configs/systems/dgx_h100.json
"$perfcast" -q predict --system $sys --workload configs/workloads/dlrm_mlperf.json --json "$tmp/predict.json" > /dev/null
"$perfcast" -q predict --system $sys --workload configs/workloads/gpt3_13b.json --set workload.global_batch=128 \
  --sweep workload.micro_batch=1,2,4,64 --compare system=$sys,configs/systems/dgx_a100.json --json "$tmp/grid.json" > /dev/null
"$perfcast" -q plan --system $sys --workload configs/workloads/llama3.1_70b.json --gpus 64 --set workload.global_batch=512 \
  --budget 20s --json "$tmp/plan.json" > /dev/null
"$perfcast" -q comm --system configs/systems/cluster_4x_dgx_h100.json --collective all_reduce --sizes 1MiB:4GiB --nodes 1,2,4 \
  --json "$tmp/comm.json" > /dev/null
"$perfcast" -q shard --system $sys --workload configs/workloads/dlrm_mlperf.json --evaluations 200 --json "$tmp/shard.json" > /dev/null
"$perfcast" -q replay --kineto data/param-dlrm-v100-8rank/dlrm_kineto.tar.gz --json "$tmp/replay.json" > /dev/null
cp tests/data/validation_results_small.jsonl "$tmp/validate.jsonl"
"$perfcast" -q kernels --system configs/systems/h200.json --measurements data/gpu-measurements/h200-2026-11-27/torch_gemm.csv \
  --json "$tmp/kernels.json" > /dev/null
"$perfcast" -q trace-stats data/param-dlrm-v100-8rank/dlrm_kineto.tar.gz --top 6 --json "$tmp/trace-stats.json" > /dev/null
"$perfcast" -q index-stats --locality data/dlrm-datasets-locality/locality_stats_2022_t788_bs131072.txt --json "$tmp/index-stats.json" > /dev/null
"$perfcast" -q calibrate comms --system configs/systems/aws_p5.json --nccl-tests data/public-measurements/nccl_two_node_p5.csv \
  --out "$tmp/p5.comms.json" --leave-one-source-out --json "$tmp/calibrate.json" > /dev/null
"$perfcast" -q profile --sweep configs/sweeps/gemm.json --sweep configs/sweeps/elementwise.json --sweep configs/sweeps/memcpy.json \
  --sweep configs/sweeps/embedding.json --dry-run --json "$tmp/profile.json" > /dev/null
# kind, input, window height (px)
for spec in predict:predict.json:860 grid:grid.json:450 plan:plan.json:560 comm:comm.json:640 shard:shard.json:900 \
            replay:replay.json:760 validate:validate.jsonl:700 kernels:kernels.json:1100 trace-stats:trace-stats.json:900 \
            index-stats:index-stats.json:1000 calibrate:calibrate.json:560 profile:profile.json:420; do
  IFS=: read -r kind input height <<< "$spec"
  [ "$kinds" = "  " ] || [[ "$kinds" == *" $kind "* ]] || continue
  "$perfcast" report "$tmp/$input" --title "perfcast report: $kind" --out "$tmp/$kind.html" > /dev/null
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot="$tmp/$kind.png" \
    --window-size=1000,"$height" "file://$tmp/$kind.html" > /dev/null 2>&1
  cp "$tmp/$kind.png" "docs/report-$kind.png"
  echo "docs/report-$kind.png"
done
