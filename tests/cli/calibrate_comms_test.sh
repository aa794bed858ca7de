#!/usr/bin/env bash
# perfcast calibrate comms: multi-node logs are fitted, a fit worse than the prior on
# held-out sizes is refused (exit 1, numbers printed, nothing written), measurement
# tables are read per source, bad tables exit 2 naming file and line.
# Usage: calibrate_comms_test.sh PERFCAST_BINARY SOURCE_DIR
source "$(dirname "$0")/test_lib.sh"
sys=$src/configs/systems/cluster_4x_dgx_h100.json

check() {  # check NAME CODE PATTERN FILE_THAT_MUST_(NOT_)EXIST -- command...
  local name=$1 code=$2 pattern=$3 file=$4
  shift 5
  rm -f "$file"
  "$@" > "$tmp/stdout" 2> "$tmp/stderr"
  local got=$?
  if [ "$got" != "$code" ]; then echo "FAIL $name: exit $got, expected $code"; cat "$tmp/stderr"; fails=$((fails + 1)); return; fi
  if [ -n "$pattern" ] && ! grep -qF -- "$pattern" "$tmp/stderr" "$tmp/stdout"; then
    echo "FAIL $name: output lacks '$pattern'"; cat "$tmp/stdout" "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if [ "$code" = 0 ] && [ ! -s "$file" ]; then echo "FAIL $name: $file not written"; fails=$((fails + 1)); return; fi
  if [ "$code" != 0 ] && [ -e "$file" ]; then echo "FAIL $name: $file written"; fails=$((fails + 1)); return; fi
  echo "ok   $name"
}

# nccl-tests layout, 16 ranks on 2 hosts (8 "#  Rank" lines per host); times from a known
# law T = 40 us + S x F / 45 GB/s + F x min(S, 16 MiB) / 90 GB/s (F = 2 x 15/16): a
# network-bound all-reduce with a mid-size ramp. Hand-made, not a measurement.
log2n() {
  echo "# Collective test starting: all_reduce_perf"
  for r in $(seq 0 15); do
    host=node0$((r / 8 + 1)); echo "#  Rank $r Group  0 Pid 4$r on $host device $((r % 8)) [0x18] NVIDIA H100 80GB HBM3"
  done
  echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
  awk 'BEGIN { for (k = 16; k <= 30; k++) { s = 2 ^ k; f = 2 * 15 / 16; m = s < 16777216 ? s : 16777216;
        t = 40 + s * f / 45e3 + f * m / 90e3; printf "%12d %12d float sum -1 %10.2f 1 1 0 %10.2f 1 1 0\n", s, s / 4, t, t } }'
}
log2n > "$tmp/all_reduce_2nodes.txt"
check "multi-node log fitted" 0 "all_reduce (multi-node)" "$tmp/cal.json" -- \
  "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/all_reduce_2nodes.txt" --out "$tmp/cal.json"
grep -q '"nodes": \[' "$tmp/cal.json" && grep -q '2,' "$tmp/cal.json" && echo "ok   nodes recorded" || { echo "FAIL nodes not recorded"; fails=$((fails + 1)); }

# An 11-size all-to-all whose times follow an alpha-beta law with +-8% alternating jitter:
# the refit chases the jitter and is worse than the spec-derived model on held-out sizes.
{
  echo "# Collective test starting: alltoall_perf"
  for r in $(seq 0 7); do echo "#  Rank $r Group  0 Pid 5$r on node01 device $r [0x18] NVIDIA H100 80GB HBM3"; done
  echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
  awk 'BEGIN { for (k = 0; k <= 10; k++) { s = 1048576 * 2 ^ k; j = (k % 2) ? 0.6 : 1.5;
        t = (30 + s * 7 / 8 / 300e3) * j; printf "%12d %12d float none -1 %10.2f 1 1 0 %10.2f 1 1 0\n", s, s / 4, t, t } }'
} > "$tmp/alltoall.txt"
check "worse-than-prior fit refused" 1 "refused: all_to_all (one node): held-out geomean |error|" "$tmp/cal.json" -- \
  "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/alltoall.txt" --out "$tmp/cal.json"
grep -q "nothing written" "$tmp/stderr" && echo "ok   refusal says nothing was written" || { echo "FAIL refusal message"; fails=$((fails + 1)); }
check "--force writes it with a warning" 0 "warning: written with --force" "$tmp/cal.json" -- \
  "$perfcast" calibrate comms --system "$sys" --nccl-tests "$tmp/alltoall.txt" --out "$tmp/cal.json" --force

# A measurement table: two sources, out-of-place times and in-place bus bandwidth.
hdr="source_url,gpu,gpus_per_node,nodes,nics_per_node_and_rate,nccl_version,env,collective,bytes,time_us,algbw_GBps,busbw_GBps,notes,inplace_time_us,inplace_busbw_GBps,tool,derived_fields"
{
  echo "$hdr"
  for k in $(seq 16 30); do
    s=$((1 << k))
    awk -v s=$s 'BEGIN { t = 25 + s * 1.75 / 300e3 + 1.75 * (s < 67108864 ? s : 67108864) / 600e3;
      printf "https://example.invalid/a,H100,8,1,n/a,2.18.5,\"NCCL_ALGO=NVLS, all_reduce_perf\",all_reduce,%d,%.2f,,,,,,nccl-tests,\n", s, t;
      printf "https://example.invalid/b,H100,8,1,n/a,2.18.5,all_reduce_perf,all_reduce,%d,,,,,,%.3f,nccl-tests,\n", s, s * 1.75 / (t * 1e3) }'
  done
} > "$tmp/table.csv"
check "measurement table, leave one source out" 0 "leave one source out" "$tmp/cal.json" -- \
  "$perfcast" calibrate comms --system "$src/configs/systems/dgx_h100.json" --nccl-tests "$tmp/table.csv" --out "$tmp/cal.json" --leave-one-source-out
grep -q "example.invalid/a" "$tmp/stdout" && grep -q "example.invalid/b" "$tmp/stdout" && grep -q "in-place busBw (derived)" "$tmp/stdout" \
  && echo "ok   both sources scored" || { echo "FAIL sources"; cat "$tmp/stdout"; fails=$((fails + 1)); }
check "--only keeps one source" 0 "" "$tmp/cal.json" -- \
  "$perfcast" calibrate comms --system "$src/configs/systems/dgx_h100.json" --nccl-tests "$tmp/table.csv" --out "$tmp/cal.json" --only example.invalid/a
grep -q "example.invalid/b" "$tmp/cal.json" && { echo "FAIL --only kept b"; fails=$((fails + 1)); } || echo "ok   --only dropped b"
{ echo "$hdr"; echo "https://example.invalid/a,H100,8,1,n/a,2.18.5,x,all_reduce,oops,1,,,,,,nccl-tests,"; } > "$tmp/bad.csv"
check "bad table row" 2 "line 2" "$tmp/cal.json" -- \
  "$perfcast" calibrate comms --system "$src/configs/systems/dgx_h100.json" --nccl-tests "$tmp/bad.csv" --out "$tmp/cal.json"

# The two 2x p5.48xlarge tables shipped in data/: leave one source out with their spread.
# The older-NCCL (EKS) table shares 6 sizes (64 MiB-2 GiB) with the Slurm one; copied exactly,
# the Slurm times are off by 39.6, 55.4, 51.2, 29.1, 28.3 and 1.3% (601.5 / 996.0 - 1, ...):
# geomean 22.3%, max 55.4%.
check "two-node p5 tables: leave one source out with the sources' spread" 0 "leave one source out" "$tmp/p5.json" -- \
  "$perfcast" calibrate comms --system "$src/configs/systems/aws_p5.json" --nccl-tests "$src/data/public-measurements/nccl_two_node_p5.csv" \
  --out "$tmp/p5.json" --leave-one-source-out --json "$tmp/p5_report.json"
python3 -c "
import json
rows = json.load(open('$tmp/p5_report.json'))['leave_one_source_out']
eks = [r for r in rows if r['source'].endswith('#line34 (https://github.com/awslabs/awsome-distributed-ai/blob/0b55ba5f073051f685f4258591b9d3a3326403c5/micro-benchmarks/nccl-tests/README.md, H100 80GB HBM3 (p5.48xlarge), out-of-place time, 2 node(s))')]
assert len(rows) == 2 and len(eks) == 1, [r['source'] for r in rows]
sp = eks[0]['spread']
assert sp['shared_sizes_from_1MiB'] == 6, sp
assert abs(sp['copy_geomean_abs_error_from_1MiB'] - 0.2233) < 0.0005 and abs(sp['copy_max_abs_error_from_64KiB'] - 0.5538) < 0.0005, sp
" && echo "ok   the EKS table's spread by hand (22.3%, max 55.4%)" || { echo "FAIL spread"; fails=$((fails + 1)); }

[ "$fails" = 0 ] && echo "all calibrate comms tests passed" || { echo "$fails failed"; exit 1; }
