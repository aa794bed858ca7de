// nccl-tests text logs and vTrain-style CSV tables (the file name carries the collective
// and rank count of a CSV: the first byte picks one of a few names).
#include "tests/fuzz/fuzz_common.hpp"
#include "topology/nccl_tests_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  if (size < 1) return 0;
  static const char* kNames[] = {"all_reduce_perf.txt", "AR_GPU8_fp16_LUT.csv", "A2A_GPU4096_x.csv", "log.txt"};
  const std::string name = kNames[data[0] % 4];
  fuzz::only_config_errors([&] {
    const CollectiveLog log = parse_collective_log_text(fuzz::text_of(data + 1, size - 1), name);
    for (const auto& s : log.samples) {
      fuzz::require_finite_time(s.time_s, "a sample's time");
      if (!(s.bytes >= 0) || !std::isfinite(s.bytes) || s.ranks < 1) std::abort();
    }
  });
  return 0;
}
