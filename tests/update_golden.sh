#!/usr/bin/env bash
# Regenerates tests/golden/ from the current model: run after an intended change to the
# predictors, the graph builder or the simulator, then review `git diff tests/golden`.
# Usage: tests/update_golden.sh [path/to/perfcast]   (default: build/cli/perfcast)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
perfcast=${1:-$root/build/cli/perfcast}
mkdir -p "$root/tests/golden"
for s in h100_sxm h200 a100_sxm dgx_h100 dgx_a100 hgx_h200 pcie_8gpu cluster_4x_dgx_h100; do
  for w in dlrm_default dlrm_mlperf dlrm_ddp; do
    out=$root/tests/golden/${s}__${w}.json
    "$perfcast" predict --system "$root/configs/systems/$s.json" --workload "$root/configs/workloads/$w.json" \
      --json "$out.new" > /dev/null
    # Keep the old file when only the date and commit of the context block changed.
    if [ -f "$out" ] && diff -q <(grep -v -e '"date"' -e '"git_commit"' "$out") \
                               <(grep -v -e '"date"' -e '"git_commit"' "$out.new") > /dev/null; then
      rm "$out.new"
    else
      mv "$out.new" "$out"
    fi
  done
done
echo "wrote $(ls "$root/tests/golden" | wc -l) golden files"
