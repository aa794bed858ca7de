#!/usr/bin/env bash
# Builds the CUDA binaries a lent-GPU session runs and stages them in gpu-carry/ (the folder the
# device tool carries), as profiler/RUNBOOK.md section 1 describes. Run on the development
# machine (nvcc 13, sm_90; no GPU needed) from the repository root:
#   scripts/prepare_gpu_carry.sh [BUILD_DIR]        # default /tmp/gpu
# Then every device command runs with carry ["gpu-carry"] and starts with
#   export LD_LIBRARY_PATH=$PWD/gpu-carry/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
set -euo pipefail
build=${1:-/tmp/gpu}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPERFCAST_ENABLE_CUDA=ON "${launcher[@]}" > "$build.configure.log"
grep -q 'PERFCAST_HAVE_CUDA=1' "$build/build.ninja" || { echo "error: CUDA was not enabled (see $build.configure.log)" >&2; exit 1; }
cmake --build "$build" --target perfcast perfcast_profiler_tests perfcast_validation_tests perfcast_inject
rm -rf gpu-carry && mkdir -p gpu-carry/lib
cp "$build/cli/perfcast" "$build/tests/profiler/perfcast_profiler_tests" "$build/tests/perfcast_validation_tests" \
   "$build/profiler/libperfcast_inject.so" gpu-carry/
strip gpu-carry/perfcast gpu-carry/perfcast_profiler_tests gpu-carry/perfcast_validation_tests gpu-carry/libperfcast_inject.so
# Non-CUDA shared libraries the device image may lack (fmt, spdlog, ...); CUDA's (cudart, CUPTI,
# cuBLASLt, NCCL) come from the image's toolkit and are far too large to carry.
ldd gpu-carry/perfcast gpu-carry/perfcast_validation_tests gpu-carry/libperfcast_inject.so | awk '/=> \// {print $3}' |
  { grep -v -E 'libcuda|libcupti|libcublas|libnccl|libc\.so|libm\.so|libstdc|libgcc|ld-linux|libdl|libpthread|librt|libutil' || true; } |
  sort -u | xargs -r -I{} cp -L {} gpu-carry/lib/
# Keep gpu-carry/ out of git (and so out of commits) without touching .gitignore.
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/gpu-carry/' "$exclude" 2> /dev/null || echo /gpu-carry/ >> "$exclude"
size=$(du -sm gpu-carry | cut -f1)
echo "gpu-carry: ${size} MiB (the carry limit is 64 MiB)"
if [ "$size" -ge 64 ]; then echo "error: gpu-carry is over the 64 MiB carry limit" >&2; exit 1; fi
