#!/usr/bin/env bash
# Reports: per-rank table roles and statistics rows, workload metrics, compare / sweep
# tables with CSV and JSON, per-rank CSV, logging levels and a clean standard output.
# Usage: reports_test.sh PERFCAST_BINARY SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
sys=$src/configs/systems
wl=$src/configs/workloads

# Per-rank table: every rank of the DGX H100 keeps its batch copy and host time.
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_mlperf.json" --csv "$tmp/ranks.csv" > "$tmp/text" 2> "$tmp/err"
check "predict --csv: one row per rank" test "$(wc -l < "$tmp/ranks.csv")" = 9
check "every rank has a non-zero copy and host time" \
  awk -F, 'NR > 1 && ($6 <= 0 || $8 <= 0) { bad = 1 } END { exit bad }' "$tmp/ranks.csv"
check "text marks the slowest and critical ranks" grep -q "slowest" "$tmp/text"
check "text has min / median / max rows" bash -c "grep -q '^ *min ' '$tmp/text' && grep -q '^ *median ' '$tmp/text' && grep -q '^ *max ' '$tmp/text'"
check "embedding lookup bandwidth" grep -q "embedding lookups:" "$tmp/text"

# 32 ranks: the notable ranks are listed, not hidden behind an ellipsis.
"$perfcast" predict --system "$sys/cluster_4x_dgx_h100.json" --workload "$wl/dlrm_mlperf.json" > "$tmp/text32" 2> /dev/null
check "32 ranks: slowest rank shown" grep -q "<-.*slowest" "$tmp/text32"
check "32 ranks: statistics rows" grep -q "^ *median " "$tmp/text32"

# Transformers: tokens/s and MFU with the formula; the split names the parallelism groups.
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/gpt3_1.3b.json" --json "$tmp/gpt.json" > "$tmp/gpt.txt" 2> /dev/null
check "tokens/s and MFU in the text" grep -q "tokens/s; MFU" "$tmp/gpt.txt"
check "MFU formula in the JSON" grep -q '"formula"' "$tmp/gpt.json"
check "iteration split in the text" grep -q "iteration split of rank" "$tmp/gpt.txt"

# Compare and sweep: one row per point in input order, CSV and JSON, serial == parallel.
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" \
  --compare "system=$sys/dgx_h100.json,$sys/dgx_a100.json" --sweep workload.batch_size=1024,4096 \
  --csv "$tmp/grid.csv" --json "$tmp/grid.json" > "$tmp/grid.txt" 2> /dev/null
check "grid: 4 CSV rows + header" test "$(wc -l < "$tmp/grid.csv")" = 5
check "grid: input order (a100 rows after h100 rows)" \
  bash -c "sed -n 2p '$tmp/grid.csv' | grep -q 'dgx_h100.json,1024,' && sed -n 5p '$tmp/grid.csv' | grep -q 'dgx_a100.json,4096,'"
check "grid: JSON has 4 points" bash -c "test \$(grep -c '\"settings\"' '$tmp/grid.json') = 4"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" \
  --compare "system=$sys/dgx_h100.json,$sys/dgx_a100.json" --sweep workload.batch_size=1024,4096 \
  --threads 1 --csv "$tmp/grid1.csv" > /dev/null 2>&1
check "grid: one thread gives the same table" cmp -s "$tmp/grid.csv" "$tmp/grid1.csv"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --sweep workload.batch_size=1024,x \
  --csv "$tmp/bad.csv" > /dev/null 2> "$tmp/err"
code=$?
check "grid: a bad point exits 2 and writes nothing" bash -c "test $code = 2 && ! test -e '$tmp/bad.csv'"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --sweep workload.batch_size= > /dev/null 2> "$tmp/err"
check "grid: empty value list exits 2" test $? = 2

# --timeout: no point starts after the limit; those run are reported, the rest marked.
sizes=$(seq -s, 1024 8 2616)  # 200 points, far more than 1 ms of work
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --sweep "workload.batch_size=$sizes" \
  --threads 1 --timeout 1ms --csv "$tmp/to.csv" --json "$tmp/to.json" > /dev/null 2> "$tmp/err"
code=$?
check "grid --timeout: exit 0 and a warning" bash -c "test $code = 0 && grep -q 'stopped by --timeout' '$tmp/err'"
check "grid --timeout: fewer CSV rows than points" test "$(wc -l < "$tmp/to.csv")" -lt 201
check "grid --timeout: JSON marks it" python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['timed_out'] and len(d['points']) == 200 and any(p['result'] is None for p in d['points'])" "$tmp/to.json"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --timeout 60s > /dev/null 2>&1
check "--timeout on a single prediction that finishes in time: exit 0" test $? = 0

# Machine output on standard output stays clean; -q silences warnings, -v is accepted.
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --csv - > "$tmp/stdout.csv" 2> /dev/null
check "--csv - writes only CSV" bash -c "head -1 '$tmp/stdout.csv' | grep -q '^rank,period_s,' && ! grep -q 'predicted' '$tmp/stdout.csv'"
"$perfcast" predict --system "$sys/pcie_8gpu.json" --workload "$wl/dlrm_default.json" --json - > "$tmp/stdout.json" 2> "$tmp/err"
check "--json -: warnings go to standard error" bash -c "python3 -m json.tool '$tmp/stdout.json' > /dev/null"
"$perfcast" -q predict --system "$sys/dgx_h100.json" --workload "$wl/missing.json" > /dev/null 2> "$tmp/err"
check "-q still reports errors" grep -q "^error: " "$tmp/err"
"$perfcast" --log-level nonsense predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" > /dev/null 2>&1
check "unknown --log-level exits 2" test $? = 2

# comm: --nodes list, --set, CSV rows per node count and size.
"$perfcast" comm --system "$sys/dgx_h100.json" --sizes 1MB,1GB --nodes 1,2 --set system.network.nic_bandwidth=200Gb/s \
  --csv "$tmp/comm.csv" --json "$tmp/comm.json" > "$tmp/comm.txt" 2> "$tmp/err"
check "comm --nodes 1,2: two tables" test "$(grep -c '^# all_reduce' "$tmp/comm.txt")" = 2
check "comm --csv: 4 rows + header" test "$(wc -l < "$tmp/comm.csv")" = 5
check "comm --csv: 16 ranks on 2 nodes" grep -q "^2,16,1000000," "$tmp/comm.csv"
check "comm --json: tables per node count with overrides in the context" \
  bash -c "grep -q '\"tables\"' '$tmp/comm.json' && grep -q 'nic_bandwidth' '$tmp/comm.json'"
"$perfcast" comm --system "$sys/dgx_h100.json" --nodes 1,x > /dev/null 2> "$tmp/err"
check "comm --nodes 1,x exits 2" test $? = 2

# --csv on replay and shard; context blocks with input hashes on predict and index-stats.
"$perfcast" replay --kineto "$src/tests/data/kineto_rank0.json" "$src/tests/data/kineto_rank1.json" --csv "$tmp/replay.csv" > /dev/null 2>&1
check "replay --csv: header and rows per (rank, step)" \
  bash -c "head -1 '$tmp/replay.csv' | grep -q '^rank,step,measured_s,simulated_s,error$' && test \$(wc -l < '$tmp/replay.csv') -ge 3"
"$perfcast" shard --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --evaluations 20 --csv "$tmp/shard.csv" > /dev/null 2>&1
check "shard --csv: baselines and the best plan" bash -c "grep -q '^best (search),' '$tmp/shard.csv' && head -1 '$tmp/shard.csv' | grep -q iteration_time_s"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --json "$tmp/p.json" > /dev/null 2>&1
check "predict context: inputs with hashes" grep -q '"fnv1a64": "[0-9a-f]\{16\}"' "$tmp/p.json"
check "predict context: the GPU's system file, the runtime profile and the calibrations are inputs too" python3 -c "
import json, sys
files = [f['file'] for f in json.load(open(sys.argv[1]))['context']['inputs']]
need = ['dgx_h100.json', 'h100_sxm.json', 'dlrm_default.json', 'pytorch_eager.json', 'nvidia_h100_sxm5_80gb.json', 'hopper_nvswitch_8gpu.comms.json']
missing = [n for n in need if not any(f.endswith(n) for f in files)]
sys.exit(1 if missing or len(files) != len(set(files)) else 0)" "$tmp/p.json"
check "predict JSON: GB/s in key names, no bytes/s keys" bash -c "grep -q '_GBps' '$tmp/p.json' && ! grep -q '_Bps\"' '$tmp/p.json'"
printf '\x05\x00\x00\x00\x05\x00\x00\x00\x07\x00\x00\x00\x05\x00\x00\x00' > "$tmp/idx.bin"
printf '\x00\x00\x00\x00\x02\x00\x00\x00\x04\x00\x00\x00' > "$tmp/off.bin"
"$perfcast" index-stats --indices "$tmp/idx.bin" --offsets "$tmp/off.bin" --tables 1 --batch 2 --dtype int32 --json "$tmp/ix.json" > /dev/null 2>&1
check "index-stats --json has a context block" grep -q '"command": "index-stats"' "$tmp/ix.json"
"$perfcast" index-stats --stats "$tmp/ix.json" > /dev/null 2>&1
check "index-stats reads its own JSON back (context ignored)" test $? = 0

# Streamed trace: gzip by name, rank and iteration filters, collective arguments, bad filter.
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --trace "$tmp/t.json.gz" \
  --trace-ranks 0,3 --trace-iterations 2 > /dev/null 2>&1
check "trace: gzip, only ranks 0 and 3 of iteration 2, collectives with bytes and algorithm" python3 -c "
import gzip, json, sys
ev = [e for e in json.load(gzip.open('$tmp/t.json.gz'))['traceEvents'] if e['ph'] == 'X']
assert ev and {e['pid'] for e in ev} == {0, 3} and {e['args']['iteration'] for e in ev} == {2}
c = [e for e in ev if 'collective' in e['args']]
assert c and all('algorithm' in e['args'] and e['dur'] >= 0 for e in c)
assert any('bytes' in e['args'] for e in c)"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --trace "$tmp/t.json" --json "$tmp/t_result.json" > /dev/null 2>&1
check "trace: critical-path events marked, covering the iteration time" python3 -c "
import json
ev = [e for e in json.load(open('$tmp/t.json'))['traceEvents'] if e['ph'] == 'X' and e['args'].get('critical_path')]
t = json.load(open('$tmp/t_result.json'))['iteration_time_s'] * 1e6
assert ev and sum(e['dur'] for e in ev) >= 0.9 * t, (len(ev), t)"
# Flow arrows: dlrm_default on 8 ranks runs 4 all-to-alls and 2 all-reduces over all 8 ranks
# per iteration (trace-stats of the Kineto round trip below); each call links its first
# rank to the 7 others: 3 iterations x 6 calls x 7 = 126 arrows, each bound to a collective's start.
check "trace: one flow arrow per collective call and other rank" python3 -c "
import json
ev = json.load(open('$tmp/t.json'))['traceEvents']
s = [e for e in ev if e['ph'] == 's']; f = [e for e in ev if e['ph'] == 'f']
starts = {(e['pid'], e['tid'], e['ts']) for e in ev if e['ph'] == 'X' and 'collective' in e['args']}
assert len(s) == len(f) == 126, (len(s), len(f))
assert all((e['pid'], e['tid'], e['ts']) in starts for e in s + f)
"
# --trace-format kineto: one PyTorch profiler trace per rank that our own Kineto reader reads
# back with the predicted per-iteration time as its step time.
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --trace "$tmp/kineto" --trace-format kineto \
  --json "$tmp/k_result.json" > /dev/null 2>&1
check "kineto: one file per rank" test "$(ls "$tmp/kineto" | wc -l)" = 8
mkdir -p "$tmp/kineto_existing"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --trace "$tmp/kineto_existing" \
  --trace-format kineto --trace-ranks 0,3 > /dev/null 2>&1
code=$?
check "kineto: an existing folder is written into, only the ranks asked for" \
  bash -c "test $code = 0 && test \"\$(ls '$tmp/kineto_existing' | tr '\n' ' ')\" = 'rank0.json rank3.json '"
"$perfcast" trace-stats "$tmp/kineto/rank0.json" --json "$tmp/k_stats.json" > /dev/null 2>&1
check "kineto: trace-stats reads 3 steps, the middle one the predicted period, 6 collectives per step" python3 -c "
import json
r = json.load(open('$tmp/k_result.json')); t = json.load(open('$tmp/k_stats.json'))
tr = t['traces'][0]; steps = tr['steps']
assert len(steps) == 3, len(steps)
period = r['ranks'][0]['period_s']
assert abs(steps[1]['wall_s'] - period) <= 1e-9 + 1e-6 * period, (steps[1]['wall_s'], period)
assert sum(c['count'] for c in tr['collectives']) == 18, tr['collectives']
"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --trace "$tmp/t.json" --trace-format kineto > /dev/null 2> "$tmp/err"
check "kineto: --trace naming a file exits 2" bash -c "test $? = 2 && grep -q 'names a folder' '$tmp/err'"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/dlrm_default.json" --trace "$tmp/bad.json" --trace-ranks 8 \
  --json "$tmp/bad_out.json" > /dev/null 2> "$tmp/err"
code=$?
check "trace: rank out of range exits 2, no file written" \
  bash -c "test $code = 2 && grep -q 'trace-ranks' '$tmp/err' && ! ls '$tmp'/bad* > /dev/null 2>&1"

# Many micro-batches (64: micro-batch 4, dp 8): the header says the steady state was
# extrapolated; --all-micro-batches and --trace simulate every one, to the same time.
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/gpt3_1.3b.json" --set workload.global_batch=2048 \
  --json "$tmp/ss.json" > "$tmp/ss.txt" 2> /dev/null
check "steady state: header names the counts simulated" grep -q "simulated 16, 17 and 18 of the 64 micro-batches" "$tmp/ss.txt"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/gpt3_1.3b.json" --set workload.global_batch=2048 \
  --all-micro-batches --json "$tmp/ss_all.json" > "$tmp/ss_all.txt" 2> /dev/null
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/gpt3_1.3b.json" --set workload.global_batch=2048 \
  --trace "$tmp/ss_trace.json" --trace-iterations 2 --json "$tmp/ss_trace_result.json" > /dev/null 2> /dev/null
check "steady state: --all-micro-batches and --trace simulate all, the same iteration time" python3 -c "
import json
a, b, c = (json.load(open('$tmp/' + n)) for n in ('ss.json', 'ss_all.json', 'ss_trace_result.json'))
assert 'steady_state' in a['context'] and a['context']['steady_state']['micro_batches'] == 64, a['context']
assert 'steady_state' not in b['context'] and 'steady_state' not in c['context']
assert abs(a['iteration_time_s'] / b['iteration_time_s'] - 1) < 1e-9, (a['iteration_time_s'], b['iteration_time_s'])
assert c['iteration_time_s'] == b['iteration_time_s']
"
check "steady state: --all-micro-batches has no extrapolation line" bash -c "! grep -q 'steady state extrapolated' '$tmp/ss_all.txt'"
"$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/gpt3_1.3b.json" --sweep workload.global_batch=128,2048 \
  > "$tmp/ss_sweep.txt" 2> /dev/null
check "steady state: a sweep's table counts the extrapolated points" grep -q "^(1 of 2 predicted points simulated a few micro-batches" "$tmp/ss_sweep.txt"
# A billion micro-batches: the extrapolated event counts pass 2^31 and stay exact (1,024
# times those of a million micro-batches, as every micro-batch adds the same events).
for gb in 1048576 1073741824; do
  "$perfcast" predict --system "$sys/dgx_h100.json" --workload "$wl/gpt3_1.3b.json" --set workload.global_batch=$gb \
    --set workload.micro_batch=1 --json "$tmp/ss_$gb.json" > /dev/null 2> /dev/null
done
check "steady state: event counts beyond 2^31 are positive and 1,024 x those at 1/1,024 of the batch" python3 -c "
import json
small, big = ({e['op_type']: e['events'] for e in json.load(open('$tmp/ss_%d.json' % gb))['critical_path']} for gb in (1048576, 1073741824))
assert all(v >= 0 for v in big.values()), big
fc = 'mb#.layer#.backward.mlp.fc#'
assert big[fc] > 2**31 and big[fc] == 1024 * small[fc], (small[fc], big[fc])
"

if [ "$fails" -gt 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all reports tests passed"
