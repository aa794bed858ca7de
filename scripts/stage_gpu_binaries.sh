#!/usr/bin/env bash
# Builds perfcast's CUDA binaries (Release, sm_90 by default) and stages them with the non-CUDA
# shared libraries they need in one folder, for a GPU machine that has the CUDA toolkit
# (cudart, CUPTI, cuBLASLt, NCCL) but not perfcast's build dependencies. Needs nvcc, not a GPU.
#   scripts/stage_gpu_binaries.sh [STAGE_DIR] [BUILD_DIR]     # defaults: gpu-bin/, /tmp/perfcast-gpu
# Copy STAGE_DIR and the repository's configs/ to the GPU machine, then run there
#   scripts/calibrate_on_gpu.sh --bin STAGE_DIR
# (docs/gpu-calibration.md). Extra CMake flags: CMAKE_FLAGS="-DCMAKE_CUDA_ARCHITECTURES=80" ...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
stage=${1:-$root/gpu-bin}
build=${2:-/tmp/perfcast-gpu}
cd "$root"
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache); fi
# shellcheck disable=SC2086
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPERFCAST_ENABLE_CUDA=ON "${launcher[@]}" ${CMAKE_FLAGS:-} \
  > "$build.configure.log"
grep -q 'PERFCAST_HAVE_CUDA=1' "$build/build.ninja" || { echo "error: CUDA was not enabled (see $build.configure.log)" >&2; exit 1; }
cmake --build "$build" --target perfcast perfcast-gpu perfcast_profiler_tests perfcast_validation_tests perfcast_inject
rm -rf "$stage" && mkdir -p "$stage/lib"
cp "$build/cli/perfcast" "$build/cli/perfcast-gpu" "$build/tests/profiler/perfcast_profiler_tests" "$build/tests/perfcast_validation_tests" \
   "$build/profiler/libperfcast_inject.so" "$stage/"
strip "$stage/perfcast" "$stage/perfcast-gpu" "$stage/perfcast_profiler_tests" "$stage/perfcast_validation_tests" "$stage/libperfcast_inject.so"
# Non-CUDA shared libraries a GPU machine may lack (fmt, spdlog, ...). The CUDA libraries come
# from the GPU machine's own toolkit (cuBLASLt and NCCL are hundreds of MB each).
ldd "$stage/perfcast" "$stage/perfcast-gpu" "$stage/perfcast_validation_tests" "$stage/libperfcast_inject.so" | awk '/=> \// {print $3}' |
  { grep -v -E 'libcuda|libcupti|libcublas|libnccl|libc\.so|libm\.so|libstdc|libgcc|ld-linux|libdl|libpthread|librt|libutil' || true; } |
  sort -u | xargs -r -I{} cp -L {} "$stage/lib/"
echo "staged $(du -sm "$stage" | cut -f1) MiB in $stage: perfcast, perfcast-gpu, perfcast_profiler_tests, perfcast_validation_tests, libperfcast_inject.so, lib/"
