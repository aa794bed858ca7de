#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz for a bounded time each and reports executions
# and findings. Usage: tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]
# (targets: system workload plan calibration measurements nccl_tests kineto
#  execution_trace index end_to_end output report options calibrate; default all). Seed corpora come from configs/ and
# tests/data and data/ (the public traces and tables); the growing corpus stays in
# BUILD_DIR/fuzz-corpus/<target>, logs in BUILD_DIR/fuzz-logs, crash inputs in
# BUILD_DIR/fuzz-findings. Exit 1 when any target found a crash, leak or timeout.
set -u
build=$(cd "$1" && pwd)
seconds=$2
shift 2
src=$(cd "$(dirname "$0")/../.." && pwd)
targets=("$@")
[ ${#targets[@]} = 0 ] && targets=(system workload plan calibration measurements nccl_tests kineto execution_trace index end_to_end
  output report options calibrate)
seeds=$build/fuzz-seeds
mkdir -p "$seeds" "$build/fuzz-corpus" "$build/fuzz-logs" "$build/fuzz-findings"

# seed TARGET NAME [PREFIX_BYTE] < FILE: one seed file; a prefix byte selects a reader.
seed() {
  local dir=$seeds/$1; mkdir -p "$dir"
  if [ $# -ge 3 ]; then { printf "\\x$3"; cat; } > "$dir/$2"; else cat > "$dir/$2"; fi
}
make_seeds() {
  for f in "$src"/configs/systems/*.json; do
    case $f in *.comms.json) seed calibration "$(basename "$f")" 00 < "$f" ;; *) seed system "$(basename "$f")" < "$f" ;; esac
  done
  for f in "$src"/configs/workloads/*.json; do seed workload "$(basename "$f")" < "$f"; done
  seed plan plan_mixed.json < "$src/tests/data/plan_mixed.json"
  for f in "$src"/configs/calibration/*.json; do seed calibration "k_$(basename "$f")" 01 < "$f"; done
  for f in "$src"/tests/data/*.jsonl "$src"/data/public-measurements/*.jsonl; do
    [ -f "$f" ] && seed measurements "$(basename "$f")" < "$f"
  done
  seed nccl_tests handwritten.txt 00 < "$src/tests/data/handwritten_all_reduce_perf.txt"
  printf 'size(B),count,type,time(ns),busbw(GB/s)\n1048576,262144,float,92790,19.78\n2097152,524288,float,93250,39.36\n' |
    seed nccl_tests table.csv 01
  for f in "$src"/data/vtrain-a100-gpt/*.csv; do [ -f "$f" ] && head -40 "$f" | seed nccl_tests "$(basename "$f")" 01; done
  for f in "$src"/tests/data/kineto_*.json; do seed kineto "$(basename "$f")" < "$f"; done
  gzip -c "$src/tests/data/kineto_rank0.json" | seed kineto rank0.json.gz
  (cd "$src/tests/data" && tar -cf - kineto_rank0.json kineto_rank1.json) | seed kineto ranks.tar
  seed execution_trace et_shapes.json < "$src/tests/data/et_shapes.json"
  for f in "$src"/data/dlrm-datasets-locality/*.txt; do [ -f "$f" ] && head -60 "$f" | seed index "$(basename "$f")" 01; done
  # Two tables, batch 3: int32 indices then lengths (the hand-worked batch of index_data_test).
  python3 -c "import struct,sys; sys.stdout.buffer.write(bytes([4,1,2]) + struct.pack('<11i', 5,5,7,5,0,1,1,1,1,1,2) + struct.pack('<11i', 3,1,0,2,4,1,0,0,0,0,0))" |
    seed index lengths.bin
  printf 'system.gpu.memory_bandwidth="2TB/s"\nworkload.batch_size=4096\n' | seed end_to_end bandwidth.txt
  printf 'system.nodes=2\n' | seed end_to_end nodes.txt
  # output: first byte odd = commit; then a file name line, then the content.
  printf 'result.json\n{"a": 1}\n' | seed output commit.txt 01
  printf 'trace.json\nsys\xfe \xe2\x82 \xf0\x9f\x98\x80\n' | seed output not_utf8.txt 00
  # report: results of each kind (first byte: 0 .json, 1 .jsonl).
  for f in "$src"/tests/golden/dgx_h100__*.json; do seed report "$(basename "$f")" 00 < "$f"; done
  seed report validation.jsonl 01 < "$src/tests/data/validation_results_small.jsonl"
  printf '{"results": [{"bytes": 1024, "busbw_GBps": 5e-324, "time_us": 5e-324}]}' | seed report comm.json 00
  printf '{"ranks": [{"rank": 0, "measured_s": 0.01, "simulated_s": 0.011}]}' | seed report replay.json 00
  # The measured and fitted kinds: kernels (rows and single), trace-stats, index-stats, the
  # three calibrations and a profile run.
  printf '{"rows": [{"kernel": "gemm 1x2x3 bf16", "row": "line 2", "measured_us": 5, "predicted_us": 6}], "not_expressible": [], "summary": {"by_family": [{"family": "gemm", "rows": 1, "geomean_abs_error": 0.2, "bias": 0.2}], "by_source": [{"source": "s", "family": "gemm", "rows": 1, "geomean_abs_error": 0.2, "bias": 0.2}]}}' | seed report kernels_rows.json 00
  printf '{"system": "x", "kernels": [{"kernel": "gemm 1x2x3 bf16", "time_us": 3.5, "bound": "memory", "predictor": "gemm"}]}' | seed report kernels.json 00
  printf '{"traces": [{"rank": 0, "steps": [{"step": 1, "wall_s": 0.002, "compute_busy_s": 0.001, "exposed_communication_s": 0.0005, "memcpy_busy_s": 1e-5}], "top_kernels": [{"name": "k", "count": 3, "nccl": true, "total_s": 0.001}]}]}' | seed report trace_stats.json 00
  printf '{"schema": "perfcast.index_stats", "tables": [{"name": "t", "batches": 2, "accesses": 100, "unique_rows": 40, "pooling_mean": 5, "zipf_alpha": 1.1, "access_shares": [0.5, 0.25, 0.25]}]}' | seed report index_stats.json 00
  printf '{"collectives": [{"collective": "all_reduce", "samples": 20, "multi_node": true, "algorithm": "ring", "held_out": {"samples": 6, "fitted": 0.05, "prior": 0.2}}], "leave_one_source_out": [{"source": "a/b.csv#line3 (u)", "calibrated_geomean_abs_error_from_1MiB": 0.1, "prior_geomean_abs_error_from_1MiB": 0.3}], "written": null}' | seed report cal_comms.json 00
  printf '{"families": [{"family": "gemm.fp16", "heldout_samples": 10, "heldout_geomean_abs_error": 0.1, "train_geomean_abs_error": 0.05}], "written": "c.json"}' | seed report cal_kernels.json 00
  printf '{"runs": [{"line": 2, "split": "fit", "measured_s": 0.01, "fitted_s": 0.011}], "op_overhead_s": 1e-5, "fit_runs": 1, "heldout_runs": 0, "written": null}' | seed report cal_runtime.json 00
  printf '{"dry_run": false, "cases": 3, "sweeps": [{"name": "gemm", "cases": 3, "warmup": 1, "repetitions": 2, "flush_l2": true}], "measured": 2, "failed": 1, "not_run": 0, "timer": "cupti", "written": "m.jsonl"}' | seed report profile.json 00
  # options: 0 sweep lines, 1 plan lists (micro-batches, cp, vp, ep, "max_tp,gpus,budget_ms,exhaustive", expert TP), 2 shard values.
  printf 'workload.batch_size=1024,2048\nsystem.nodes=1,2\n' | seed options sweep.txt 00
  printf '1,2\n1,2\n1\n\n8,8,500\n' | seed options plan.txt 01
  printf '10s\n3,7\n30s\nauto\nsearch\ntorchrec\n' | seed options shard.txt 02
  # calibrate: 0 calibrate runtime CSV (absolute workload paths), 1 nccl-tests log, 2 measurement table.
  {
    echo "workload,measured,set,split"
    for b in 1024 2048 4096 8192 16384 32768; do echo "$src/configs/workloads/dlrm_default.json,$((b / 256))ms,workload.batch_size=$b,fit"; done
  } | seed calibrate runtime.csv 00
  seed calibrate handwritten.txt 01 < "$src/tests/data/handwritten_all_reduce_perf.txt"
  for f in "$src"/data/public-measurements/*.csv; do [ -f "$f" ] && head -60 "$f" | seed calibrate "$(basename "$f")" 02; done
}
make_seeds

failed=0
printf '%-16s %8s %14s %9s\n' target seconds executions findings
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  if [ ! -x "$bin" ]; then echo "missing $bin (configure with -DPERFCAST_FUZZ=ON and build perfcast_fuzz_targets)"; failed=1; continue; fi
  corpus=$build/fuzz-corpus/$t; mkdir -p "$corpus"
  dict=()
  [ -f "$src/tests/fuzz/dict/$t.dict" ] && dict=(-dict="$src/tests/fuzz/dict/$t.dict")
  log=$build/fuzz-logs/$t.log
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 -max_len=262144 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-findings/$t-" "${dict[@]}" "$corpus" "$seeds/$t" > "$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  findings=$(ls "$build/fuzz-findings" 2>/dev/null | grep -c "^$t-")
  printf '%-16s %8s %14s %9s\n' "$t" "$seconds" "${execs:-?}" "$findings"
  if [ "$rc" != 0 ] || [ "$findings" != 0 ]; then
    failed=1
    grep -m 3 '^finding:' "$log"  # the contract broken, printed before the stack
    tail -30 "$log"
    # The input itself, so that a finding on a machine that is gone can be replayed:
    # base64 -d > crash; BUILD_DIR/tests/fuzz/fuzz_TARGET crash
    for f in "$build/fuzz-findings/$t"-*; do
      [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 65536 ] && echo "input $(basename "$f") (base64):" && base64 -w 0 "$f" && echo
    done
  fi
done
rm -rf /tmp/perfcast_fuzz_*
exit $failed
