// Kineto (PyTorch profiler) traces as users hand them over: plain JSON, gzip, or a tar /
// tar.gz archive of rank traces (read in-process: zlib, libarchive). The file name
// follows the bytes (gzip magic, "ustar" at offset 257).
#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_stats.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  const std::string bytes = fuzz::text_of(data, size);
  const bool tar = size > 262 && bytes.compare(257, 5, "ustar") == 0;
  const bool gz = size > 2 && data[0] == 0x1f && data[1] == 0x8b;
  const std::string path = fuzz::scratch_file(tar ? ".tar" : gz ? ".tar.gz" : ".json", bytes);
  fuzz::only_config_errors([&] {
    for (const auto& t : load_kineto_traces({path})) {
      for (const auto& s : t.steps) fuzz::require_finite_time(s.duration, "a step's duration");
      for (const auto& a : t.gpu) fuzz::require_finite_time(a.duration, "a GPU activity's duration");
    }
  });
  return 0;
}
