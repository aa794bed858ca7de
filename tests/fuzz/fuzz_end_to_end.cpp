// End to end: a shipped system and DLRM workload edited by what-if overrides taken from
// the input (one "PATH=VALUE" per line, as `perfcast predict --set`), then graph,
// simulation and report. The predicted iteration time must be finite and positive.
#include <sstream>

#include "model/predict/predict.hpp"
#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace perfcast;
  const std::string src = PERFCAST_SOURCE_DIR;
  PredictRequest req;
  req.system = src + "/configs/systems/dgx_h100.json";
  req.workload = src + "/configs/workloads/dlrm_default.json";
  req.iterations = 2;
  std::istringstream in(fuzz::text_of(data, size));
  for (std::string line; std::getline(in, line) && req.overrides.size() < 8;)
    if (line.find('=') != std::string::npos) req.overrides.push_back(line);
  fuzz::only_config_errors([&] {
    const auto p = predict(req);
    fuzz::require_finite_time(p->timeline.iteration_time, "the predicted iteration time");
    if (!(p->timeline.iteration_time > 0)) std::abort();
  });
  return 0;
}
