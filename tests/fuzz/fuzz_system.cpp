// System JSON (configs/systems/*.json): parse_system through the one JSON parser.
#include "tests/fuzz/fuzz_common.hpp"
#include "topology/system_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  fuzz::only_config_errors([&] {
    JsonDocument doc{parse_json_text(fuzz::text_of(data, size), "system.json"), "system.json"};
    const SystemSpec s = parse_system(doc);
    (void)s.world_size();
  });
  return 0;
}
