// The executor's interface in a build without CUDA: nothing can run, and callers are told why.
#include "profiler/cuda_error.hpp"
#include "validation/executor.hpp"

namespace perfcast::validation {

bool executor_available(std::string* why) {
  if (why) *why = "this build has no CUDA";
  return false;
}

RunResult run_dlrm(const SystemSpec&, const DlrmSpec&, const ShardingPlan&, const ExecutorOptions&) {
  throw profiler::NoCudaDeviceError("this build has no CUDA (configure with -DPERFCAST_ENABLE_CUDA=ON)");
}

}  // namespace perfcast::validation
