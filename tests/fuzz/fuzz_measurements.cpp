// Kernel measurement JSON lines (read_measurements), the files `calibrate kernels` fits
// to; the validation and PyTorch result files go through the same for_each_json_line.
#include "predictors/measurement.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  const std::string path = fuzz::scratch_file(".jsonl", fuzz::text_of(data, size));
  fuzz::only_config_errors([&] { (void)read_measurements(path); });
  return 0;
}
