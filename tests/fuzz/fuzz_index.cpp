// Index data (raw int32/int64 indices plus offsets or lengths, DLRM dataset layout) and
// locality-statistics text files. Input: [selector byte][tables byte][batch byte] then
// the two arrays split at the middle, or the stats text.
#include "predictors/index_data.hpp"
#include "predictors/index_stats_file.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  if (size < 3) return 0;
  const std::uint8_t sel = data[0];
  if (sel & 1) {
    const std::string path = fuzz::scratch_file(".txt", fuzz::text_of(data + 1, size - 1));
    fuzz::only_config_errors([&] { (void)read_locality_stats(path); });
    return 0;
  }
  const std::size_t half = 3 + (size - 3) / 2;
  const IndexDType dtype = (sel & 2) ? IndexDType::kInt64 : IndexDType::kInt32;
  const std::string ip = fuzz::scratch_file(".idx", fuzz::text_of(data + 3, half - 3));
  const std::string bytes = fuzz::text_of(data + half, size - half);
  fuzz::only_config_errors([&] {
    IndexData d;
    d.indices = read_index_array(ip, dtype);
    d.bags = read_index_array(fuzz::scratch_file(".off", bytes), dtype);
    d.encoding = (sel & 4) ? BagEncoding::kLengths : BagEncoding::kOffsets;
    d.tables = data[1] % 8 + 1;
    d.batch = data[2] % 16 + 1;
    IndexStatsOptions opt;
    if (sel & 8) opt.rows = {static_cast<std::int64_t>(sel) << 40};
    const auto stats = compute_index_stats(d, opt);
    (void)summarize_index_stats(stats, opt);
  });
  return 0;
}
