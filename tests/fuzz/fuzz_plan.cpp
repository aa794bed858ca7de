// Sharding plan JSON (TorchRec ParameterSharding fields) against the shipped DLRM workload
// on 8 ranks (2 nodes of 4 GPUs).
#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  static const DlrmSpec w = load_workload(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/dlrm_default.json");
  fuzz::only_config_errors([&] {
    JsonDocument doc{parse_json_text(fuzz::text_of(data, size), "plan.json"), "plan.json"};
    (void)parse_plan(doc, w, 8, 4);
  });
  return 0;
}
