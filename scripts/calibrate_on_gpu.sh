#!/usr/bin/env bash
# Calibrates and validates perfcast on the GPU of this machine, in one command:
#   1. the [gpu] tests of the profiler and of the executor (about 3 min);
#   2. the microbenchmark sweeps: memcpy + elementwise (about 3 min), GEMM (budget, default
#      20 min of the 6,000 shapes), embedding forward/backward (budget, default 10 min);
#   3. perfcast calibrate kernels -> a kernel calibration with the held-out error per family;
#   4. perfcast validate: 50 random DLRM configs predicted and trained, twice (seeds 1 and 7031;
#      about 2-3 s per config), with the calibration of step 3 when --install is given;
#   5. perfcast run of dlrm_default beside perfcast predict.
# Everything goes to the results folder (--out, default gpu-results/<system>-<date>/); the calibration is written to
# calibration.json there and, with --install, to configs/calibration/<gpu>.json, where predict finds
# it by GPU name. Usage (from the repository root):
#   scripts/calibrate_on_gpu.sh [--system configs/systems/h100_sxm.json] [--bin DIR] [--out DIR]
#        [--gemm-minutes 20] [--embedding-minutes 10] [--configs 50] [--quick] [--install]
# --bin: a folder of staged binaries (scripts/stage_gpu_binaries.sh), default build/ of `make`.
# --quick: 2 + 2 minutes of sweeps and 10 configs per seed (about 15 minutes in all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
system=configs/systems/h100_sxm.json
bin=""
results=""
gemm_minutes=20
embedding_minutes=10
configs=50
install=0
while [ $# -gt 0 ]; do
  case "$1" in
    --system) system=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) results=$2; shift 2 ;;
    --gemm-minutes) gemm_minutes=$2; shift 2 ;;
    --embedding-minutes) embedding_minutes=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --quick) gemm_minutes=2; embedding_minutes=2; configs=10; shift ;;
    --install) install=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
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
command -v nvidia-smi > /dev/null && nvidia-smi -L
name=$(basename "$system" .json)
results=${results:-gpu-results/$name-$(date -u +%Y%m%d-%H%M)}
mkdir -p "$results"
log() { echo "== $(date -u +%H:%M:%S) $*"; }

log "1/5 [gpu] tests (about 3 min)"
"$profiler_tests" '[gpu]' 2>&1 | tee "$results/profiler_gpu_tests.log" | tail -3
"$validation_tests" '[gpu]' 2>&1 | tee "$results/validation_gpu_tests.log" | tail -3

log "2/5 sweeps (memcpy + elementwise, GEMM ${gemm_minutes} min, embedding ${embedding_minutes} min)"
"$perfcast" profile --sweep configs/sweeps/memcpy.json --sweep configs/sweeps/elementwise.json \
  --out "$results/memcpy_elementwise.jsonl" --no-progress
"$perfcast" profile --sweep configs/sweeps/gemm.json --out "$results/gemm.jsonl" \
  --time-budget $((gemm_minutes * 60)) --no-progress
"$perfcast" profile --sweep configs/sweeps/embedding.json --out "$results/embedding.jsonl" \
  --time-budget $((embedding_minutes * 60)) --no-progress

log "3/5 kernel calibration (held-out: a deterministic 20% of the shapes)"
"$perfcast" calibrate kernels --system "$system" --measurements "$results"/memcpy_elementwise.jsonl \
  "$results/gemm.jsonl" "$results/embedding.jsonl" --out "$results/calibration.json" --json "$results/calibration_report.json" \
  | tee "$results/calibration.txt"
if [ "$install" = 1 ]; then
  # The same deterministic fit, written where predict and validate look it up by GPU name.
  "$perfcast" calibrate kernels --system "$system" --measurements "$results"/memcpy_elementwise.jsonl \
    "$results/gemm.jsonl" "$results/embedding.jsonl" > /dev/null
  log "installed the calibration under configs/calibration/: the predictions below use it"
else
  log "not installed (--install): the predictions below use what configs/calibration/ already has"
fi

log "4/5 perfcast validate: $configs configs, seeds 1 and 7031"
for seed in 1 7031; do
  "$perfcast" validate --system "$system" --configs "$configs" --seed "$seed" --out-dir "$results/results" \
    --json "$results/validate_seed$seed.json" | tail -6
done

log "5/5 perfcast run beside perfcast predict (dlrm_default)"
"$perfcast" run --system "$system" --workload configs/workloads/dlrm_default.json --warmup 5 --iterations 50 \
  --json "$results/run_dlrm_default.json" --trace "$results/run_dlrm_default.trace.json" | tail -4
"$perfcast" predict --system "$system" --workload configs/workloads/dlrm_default.json \
  --json "$results/predict_dlrm_default.json" | head -4
log "done: results in $results (docs/gpu-calibration.md says what to check and where to put them)"
