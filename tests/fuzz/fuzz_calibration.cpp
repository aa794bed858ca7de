// Calibration JSON: kernel calibration and collective (comms) calibration files; the
// first byte picks the reader.
#include "predictors/kernel_calibration.hpp"
#include "tests/fuzz/fuzz_common.hpp"
#include "topology/collective_calibration.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  if (size < 1) return 0;
  fuzz::only_config_errors([&] {
    JsonDocument doc{parse_json_text(fuzz::text_of(data + 1, size - 1), "calibration.json"), "calibration.json"};
    if (data[0] & 1) (void)parse_kernel_calibration(doc);
    else (void)parse_calibration(doc);
  });
  return 0;
}
