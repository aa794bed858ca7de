#!/usr/bin/env bash
# perfcast plan: the text report, CSV rows per predicted plan, JSON, --budget, screening
# against --exhaustive, and bad
# input (a DLRM workload, a GPU count that is not whole nodes) exiting 2 without output.
# Usage: plan_test.sh PERFCAST_BINARY SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
sys=$src/configs/systems/dgx_h100.json
small=(--system "$sys" --workload "$src/configs/workloads/gpt2.json" --gpus 4 --set workload.global_batch=16 --micro-batches 1,2)

"$perfcast" plan "${small[@]}" --csv "$tmp/plans.csv" --json "$tmp/plans.json" > "$tmp/text" 2> "$tmp/err"
check "plan exits 0" test $? = 0
# 42 plans: see tests/model/plan_search_test.cpp for the hand count.
check "CSV: 42 plans + header" test "$(wc -l < "$tmp/plans.csv")" = 43
check "CSV: ranked by iteration time" bash -c "tail -n +2 '$tmp/plans.csv' | cut -d, -f14 | sort -g -c"
check "text: the fastest is marked" grep -q "fastest" "$tmp/text"
check "text: dominated choices are counted" grep -q "84 dominated" "$tmp/text"
check "text: where the file's own parallelism stands" grep -q "the workload file's own parallelism" "$tmp/text"
check "JSON: 42 plans, 84 rejected" python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['plans']) == 42 and len(d['rejected']) == 84 and d['plans'][0]['why_slower'] == ''" "$tmp/plans.json"

# Screening: the ten fastest are simulated in full and equal those of --exhaustive, which
# simulates every candidate; the rest may be estimates, marked in the "how" column.
"$perfcast" plan "${small[@]}" --exhaustive --csv "$tmp/plans_all.csv" --json "$tmp/plans_all.json" > "$tmp/text_all" 2>&1
check "--exhaustive: the same ten fastest" bash -c "diff <(head -n 11 '$tmp/plans.csv') <(head -n 11 '$tmp/plans_all.csv')"
check "--exhaustive: every plan simulated" bash -c "test \"\$(tail -n +2 '$tmp/plans_all.csv' | cut -d, -f19 | sort -u)\" = simulated"
check "screened: the ten fastest simulated, some plans estimated" bash -c "test \"\$(head -n 11 '$tmp/plans.csv' | tail -n +2 | cut -d, -f19 | sort -u)\" = simulated && cut -d, -f19 '$tmp/plans.csv' | grep -qx estimated"
check "screened: the text marks estimates" grep -q "estimated from two short simulations" "$tmp/text"
check "JSON: how, and the simulations counted" python3 -c "
import json, sys
d, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
s = d['search']
assert not s['exhaustive'] and s['short_simulations'] > 0 and s['coverage']['estimated'] > 0
assert s['full_simulations'] + s['coverage']['estimated'] == len(d['plans'])
assert all(p['how'] == 'simulated' for p in d['plans'][:10])
assert a['search']['exhaustive'] and a['search']['short_simulations'] == 0 and a['search']['full_simulations'] == 42
" "$tmp/plans.json" "$tmp/plans_all.json"

# MoE parallel folding: --expert-tp searches the experts' TP apart from the attention's.
"$perfcast" plan "${small[@]}" --set 'workload.moe={"experts": 4, "top_k": 2}' --ep 2 --expert-tp 1,2 --overlaps off \
  --top 100 --csv "$tmp/moe.csv" > "$tmp/moe.txt" 2>&1
check "--expert-tp: both expert TP sizes ranked" bash -c "test \"\$(tail -n +2 '$tmp/moe.csv' | cut -d, -f20 | sort -u | tr '\n' ' ')\" = '1 2 '"
check "--expert-tp: folded plans shown as ep/expert TP" grep -qE "^ +[0-9]+ +2 .* 2/1 " "$tmp/moe.txt"

"$perfcast" plan "${small[@]}" --overlaps off --csv "$tmp/plans_off.csv" > /dev/null 2>&1
check "--overlaps off: 18 plans, none overlapped" bash -c "test \$(wc -l < '$tmp/plans_off.csv') = 19 && ! tail -n +2 '$tmp/plans_off.csv' | cut -d, -f12,13 | grep -q true"

"$perfcast" plan "${small[@]}" --threads 1 --csv "$tmp/plans1.csv" > /dev/null 2>&1
check "one thread gives the same table" cmp -s "$tmp/plans.csv" "$tmp/plans1.csv"

"$perfcast" plan "${small[@]}" --threads 1 --budget 1ms --json "$tmp/budget.json" > /dev/null 2> "$tmp/err"
check "--budget 1ms: a warning" grep -q "stopped by --budget" "$tmp/err"
check "--budget 1ms: not_run listed" python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['search']['timed_out'] and len(d['not_run']) > 0" "$tmp/budget.json"

"$perfcast" plan --system "$sys" --workload "$src/configs/workloads/dlrm_default.json" --json "$tmp/dlrm.json" > /dev/null 2> "$tmp/err"
code=$?
check "DLRM: exit 2, names perfcast shard, nothing written" bash -c "test $code = 2 && grep -q 'perfcast shard' '$tmp/err' && ! test -e '$tmp/dlrm.json'"
"$perfcast" plan --system "$sys" --workload "$src/configs/workloads/gpt2.json" --gpus 12 > /dev/null 2> "$tmp/err"
code=$?
check "--gpus 12 on 8-GPU nodes: exit 2" bash -c "test $code = 2 && grep -q 'whole nodes of 8 GPUs' '$tmp/err'"

# --max-tp 16 on two nodes: TP groups across nodes are tried, and their per-layer collectives
# over the network rank them last.
"$perfcast" plan --system "$sys" --workload "$src/configs/workloads/gpt3_1.3b.json" --gpus 16 --set workload.global_batch=16 \
  --micro-batches 1 --overlaps off --max-tp 16 --csv "$tmp/tp16.csv" > /dev/null 2>&1
check "--max-tp 16: tp 16 plans, ranked last" bash -c "tail -n +2 '$tmp/tp16.csv' | cut -d, -f2 | grep -qx 16 && test \"\$(tail -n 1 '$tmp/tp16.csv' | cut -d, -f2)\" = 16"

[ "$fails" = 0 ] && echo "all plan tests passed" || { echo "$fails failed"; exit 1; }
