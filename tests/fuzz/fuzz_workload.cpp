// Workload JSON (DLRM, Transformer, imported trace workloads): parse_any_workload.
#include "model/predict/workload.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  fuzz::only_config_errors([&] {
    JsonDocument doc{parse_json_text(fuzz::text_of(data, size), "workload.json"), "workload.json"};
    (void)parse_any_workload(doc);
  });
  return 0;
}
