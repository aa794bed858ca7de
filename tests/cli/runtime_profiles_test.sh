#!/usr/bin/env bash
# Runtime profiles: Transformers default to megatron_deepspeed (fitted host costs, named in
# the headline), --set runtime=NAME overrides, an unknown runtime exits 2 naming the folder,
# a workload naming its runtime is honoured. Usage: runtime_profiles_test.sh PERFCAST SOURCE_DIR
set -u
perfcast=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
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

[ "$fails" = 0 ] && echo "all runtime profile tests passed" || { echo "$fails failed"; exit 1; }
