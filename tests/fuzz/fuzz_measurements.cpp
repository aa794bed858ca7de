// Measurement and result JSON lines: kernel measurements (read_measurements) and
// validation result files (summarize_result_files); the first byte picks the reader.
#include "predictors/measurement.hpp"
#include "tests/fuzz/fuzz_common.hpp"
#include "validation/validate_harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  if (size < 1) return 0;
  const std::string path = fuzz::scratch_file(".jsonl", fuzz::text_of(data + 1, size - 1));
  fuzz::only_config_errors([&] {
    if (data[0] & 1) (void)read_measurements(path);
    else (void)validation::summarize_result_files({path});
  });
  return 0;
}
