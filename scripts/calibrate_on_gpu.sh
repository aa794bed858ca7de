#!/usr/bin/env bash
# Calibrates and validates perfcast on the GPU of this machine, in one command:
#   1. the [gpu] tests of the profiler and of the executor (about 3 min; --tests-seconds bounds each);
#   2. the microbenchmark sweeps: memcpy + elementwise (about 3 min), GEMM (budget, default
#      20 min of the 6,000 shapes), embedding forward/backward (budget, default 10 min);
#   3. attention (SDPA flash and cuDNN, forward and backward; Megatron-Core's shapes also with
#      dropout 0.1) and fp8 / bf16 GEMMs timed through PyTorch (scripts/measure_kernels_torch.py;
#      skipped without PyTorch), then `perfcast kernels` on them; and a Transformer layer's GEMMs
#      run back to back for --sustained-seconds with the SM clock and power logged
#      (scripts/measure_sustained_gemm.py): what a busy GPU sustains against single launches;
#   4. perfcast calibrate kernels -> a kernel calibration with the held-out error per family;
#   5. perfcast validate: random DLRM configs predicted and trained (50 per seed, seeds 1 and
#      7031; about 2-3 s per config), with the calibration of step 4 when --install is given;
#   6. perfcast run of dlrm_default beside perfcast predict.
# Everything goes to the results folder (--out, default gpu-results/<system>-<date>/); the calibration is
# written to calibration.json there and, with --install, to configs/calibration/<gpu>.json, where
# predict finds it by GPU name. A step that fails is reported and the others still run (exit 1 at
# the end); a sweep stopped by its budget keeps what it measured. Usage (from the repository root):
#   scripts/calibrate_on_gpu.sh [--system configs/systems/h100_sxm.json] [--bin DIR] [--out DIR]
#        [--gemm-minutes 20] [--embedding-minutes 10] [--configs 50] [--quick] [--install]
#        [--minutes M] [--tests-seconds S] [--torch-seconds S] [--sustained-seconds S] [--seeds "1 7031"]
# --bin: a folder of staged binaries (scripts/stage_gpu_binaries.sh), default build/ of `make`.
# --quick: 2 + 2 minutes of sweeps and 10 configs per seed (about 15 minutes in all).
# --minutes M: the whole run in about M minutes (M >= 6): the tests, sweeps and PyTorch timings get
#   fixed shares of it, 8 validation configs for seed 1 and 4 for
#   seed 7031, and 20 timed iterations, each step bounded.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
system=configs/systems/h100_sxm.json
bin=""
results=""
gemm_seconds=1200
embedding_seconds=600
memcpy_seconds=0
torch_seconds=120
sustained_seconds=60
tests_seconds=0
configs=50
configs_second_seed=""
seeds="1 7031"
iterations=50
validate_seconds=0
install=0
while [ $# -gt 0 ]; do
  case "$1" in
    --system) system=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) results=$2; shift 2 ;;
    --gemm-minutes) gemm_seconds=$(($2 * 60)); shift 2 ;;
    --embedding-minutes) embedding_seconds=$(($2 * 60)); shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --tests-seconds) tests_seconds=$2; shift 2 ;;
    --torch-seconds) torch_seconds=$2; shift 2 ;;
    --sustained-seconds) sustained_seconds=$2; shift 2 ;;
    --quick) gemm_seconds=120; embedding_seconds=120; configs=10; shift ;;
    --minutes)
      [ "$2" -ge 6 ] 2>/dev/null || { echo "error: --minutes expects a whole number >= 6, got $2" >&2; exit 2; }
      total=$(($2 * 60))
      tests_seconds=$((total * 8 / 100)); memcpy_seconds=$((total * 8 / 100)); gemm_seconds=$((total * 26 / 100))
      embedding_seconds=$((total * 20 / 100)); torch_seconds=$((total * 12 / 100)); sustained_seconds=$((total * 6 / 100))
      configs=8; configs_second_seed=4
      validate_seconds=$((total * 10 / 100)); iterations=20; shift 2 ;;
    --install) install=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$bin" ]; then
  perfcast=$bin/perfcast; profiler_tests=$bin/perfcast_profiler_tests; validation_tests=$bin/perfcast_validation_tests
  export LD_LIBRARY_PATH=$bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
else
  perfcast=build/cli/perfcast; profiler_tests=build/tests/profiler/perfcast_profiler_tests
  validation_tests=build/tests/perfcast_validation_tests
fi
for f in "$perfcast" "$profiler_tests" "$validation_tests" "$system"; do
  [ -e "$f" ] || { echo "error: $f not found (build with make, or stage with scripts/stage_gpu_binaries.sh)" >&2; exit 2; }
done
name=$(basename "$system" .json)
results=${results:-gpu-results/$name-$(date -u +%Y%m%d-%H%M)}
mkdir -p "$results"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
failed=()
# step NAME SECONDS COMMAND...: runs COMMAND (bounded by SECONDS unless 0), records a failure, goes on.
step() {
  local what=$1 limit=$2; shift 2
  if [ "$limit" -gt 0 ]; then timeout --signal=INT --kill-after=10 "$limit" "$@"; else "$@"; fi
  local rc=$?
  if [ $rc -ne 0 ]; then
    [ $rc -eq 124 ] && log "$what stopped at its limit of ${limit} s" || log "$what FAILED (exit $rc)"
    failed+=("$what (exit $rc)")
  fi
  return 0
}
{
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
    --format=csv
  echo "perfcast commit ${PERFCAST_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}; system $system"
} | tee "$results/machine.txt"
# Extra seconds after a sweep's budget for the case under way and the file's close.
margin=30

log "1/6 [gpu] tests$([ "$tests_seconds" -gt 0 ] && echo " (at most $tests_seconds s each)")"
step "profiler [gpu] tests" "$tests_seconds" bash -c "'$profiler_tests' '[gpu]' --durations yes > '$results/profiler_gpu_tests.log' 2>&1"
tail -3 "$results/profiler_gpu_tests.log"
step "validation [gpu] tests" "$tests_seconds" bash -c "'$validation_tests' '[gpu]' --durations yes > '$results/validation_gpu_tests.log' 2>&1"
tail -3 "$results/validation_gpu_tests.log"

log "2/6 sweeps (memcpy + elementwise, GEMM ${gemm_seconds} s, embedding ${embedding_seconds} s)"
step "memcpy + elementwise sweep" $((memcpy_seconds > 0 ? memcpy_seconds + margin : 0)) "$perfcast" profile \
  --sweep configs/sweeps/memcpy.json --sweep configs/sweeps/elementwise.json --out "$results/memcpy_elementwise.jsonl" \
  --time-budget "$memcpy_seconds" --no-progress
step "GEMM sweep" $((gemm_seconds + margin)) "$perfcast" profile --sweep configs/sweeps/gemm.json \
  --out "$results/gemm.jsonl" --time-budget "$gemm_seconds" --no-progress
step "embedding sweep" $((embedding_seconds + margin)) "$perfcast" profile --sweep configs/sweeps/embedding.json \
  --out "$results/embedding.jsonl" --time-budget "$embedding_seconds" --no-progress
# A sweep killed at its limit leaves its finished cases in <out>.partial.
for f in memcpy_elementwise gemm embedding; do
  [ -s "$results/$f.jsonl" ] || { [ -s "$results/$f.jsonl.partial" ] && cp "$results/$f.jsonl.partial" "$results/$f.jsonl"; }
done

log "3/6 attention and fp8/bf16 GEMMs through PyTorch (${torch_seconds} s)"
if [ "$torch_seconds" -gt 0 ] && python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null; then
  step "PyTorch kernel timings" $((torch_seconds + 60)) python3 scripts/measure_kernels_torch.py --out "$results/torch" \
    --seconds "$torch_seconds"
  step "perfcast kernels on the PyTorch timings" 0 bash -c "'$perfcast' kernels --system '$system' --measurements \
    '$results/torch/attention.csv' '$results/torch/gemm.csv' --json '$results/torch/kernels_report.json' \
    > '$results/torch/kernels_report.txt'"
  head -40 "$results/torch/kernels_report.txt" 2> /dev/null
  if [ "$sustained_seconds" -gt 0 ]; then
    step "sustained GEMMs" $((sustained_seconds + 60)) bash -c "python3 scripts/measure_sustained_gemm.py --out \
      '$results/torch' --seconds '$sustained_seconds' > '$results/torch/sustained_gemm.txt' 2>&1"
    cat "$results/torch/sustained_gemm.txt" 2> /dev/null
  fi
else
  log "skipped: no PyTorch with a CUDA GPU here, or --torch-seconds 0"
fi

log "4/6 kernel calibration (held-out: a deterministic 20% of the shapes)"
measurements=()
for f in memcpy_elementwise gemm embedding; do [ -s "$results/$f.jsonl" ] && measurements+=("$results/$f.jsonl"); done
if [ ${#measurements[@]} -gt 0 ]; then
  step "calibrate kernels" 0 bash -c "'$perfcast' calibrate kernels --system '$system' --measurements ${measurements[*]} \
    --out '$results/calibration.json' --json '$results/calibration_report.json' > '$results/calibration.txt'"
  cat "$results/calibration.txt"
  if [ "$install" = 1 ]; then
    # The same deterministic fit, written where predict and validate look it up by GPU name.
    step "install calibration" 0 "$perfcast" calibrate kernels --system "$system" --measurements "${measurements[@]}"
    log "installed the calibration under configs/calibration/: the predictions below use it"
  else
    log "not installed (--install): the predictions below use what configs/calibration/ already has"
  fi
else
  log "no sweep measured anything: no calibration"
  failed+=("calibration (no measurements)")
fi

log "5/6 perfcast validate (seeds $seeds)"
first=1
for seed in $seeds; do
  n=$configs limit=$validate_seconds
  [ $first = 0 ] && [ -n "$configs_second_seed" ] && n=$configs_second_seed limit=$((validate_seconds / 2))
  first=0
  step "validate seed $seed" "$limit" "$perfcast" validate --system "$system" --configs "$n" --seed "$seed" \
    --out-dir "$results/results" --json "$results/validate_seed$seed.json"
done

log "6/6 perfcast run beside perfcast predict (dlrm_default)"
step "run dlrm_default" "$validate_seconds" "$perfcast" run --system "$system" --workload configs/workloads/dlrm_default.json --warmup 5 \
  --iterations "$iterations" --json "$results/run_dlrm_default.json" --trace "$results/run_dlrm_default.trace.json"
step "predict dlrm_default" 0 "$perfcast" predict --system "$system" --workload configs/workloads/dlrm_default.json \
  --json "$results/predict_dlrm_default.json"
if [ ${#failed[@]} -gt 0 ]; then
  log "done with ${#failed[@]} failed or cut step(s): ${failed[*]} (results in $results)"
  exit 1
fi
log "done: results in $results (docs/gpu-calibration.md says what to check and where to put them)"
