// PyTorch execution traces (ExecutionTraceObserver JSON): nodes, shapes, tensors and the
// data-dependency pass.
#include "model/traces/execution_trace.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  fuzz::only_config_errors([&] { (void)parse_execution_trace(fuzz::text_of(data, size), "et.json"); });
  return 0;
}
