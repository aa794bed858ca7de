#!/usr/bin/env bash
# Renders one `perfcast report` page per result kind with headless Chromium into
# docs/report-<kind>.png (the screenshots of docs/reports.md): predict, a predict grid
# (--sweep x --compare), plan, comm, shard, replay (the public PARAM DLRM traces) and
# validation lines. Usage: scripts/report_screenshots.sh [BUILD_DIR]   (default build)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
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
# kind, input, window height (px)
for spec in predict:predict.json:860 grid:grid.json:450 plan:plan.json:560 comm:comm.json:640 shard:shard.json:900 \
            replay:replay.json:760 validate:validate.jsonl:700; do
  IFS=: read -r kind input height <<< "$spec"
  "$perfcast" report "$tmp/$input" --title "perfcast report: $kind" --out "$tmp/$kind.html" > /dev/null
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --screenshot="$tmp/$kind.png" \
    --window-size=1000,"$height" "file://$tmp/$kind.html" > /dev/null 2>&1
  cp "$tmp/$kind.png" "docs/report-$kind.png"
  echo "docs/report-$kind.png"
done
