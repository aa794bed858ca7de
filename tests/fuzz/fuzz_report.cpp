// `perfcast report`'s inputs: any result file (predict, comm, shard, replay, validation
// lines, or anything else) is recognised or refused with ConfigError, and the HTML page is
// rendered and ends (a 52-byte comm result with a subnormal value once looped forever).
#include "model/report/html_report.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  if (size < 1) return 0;
  static const char* kSuffixes[] = {".json", ".jsonl"};
  const std::string path = fuzz::scratch_file(kSuffixes[data[0] % 2], fuzz::text_of(data + 1, size - 1));
  fuzz::only_config_errors([&] {
    const ReportInput in = load_report_input(path);
    const std::string html = render_html_report({in}, "fuzz");
    if (html.find("</html>") == std::string::npos) std::abort();
  });
  return 0;
}
