// `perfcast calibrate runtime` and `calibrate comms` inputs, read and fitted as the command
// does. The first byte picks: measured step times (CSV of calibrate runtime, its workloads
// given by absolute paths), an nccl-tests log, or a measurement table CSV (the last two
// fitted per collective, ranks and nodes, as calibrate comms groups them, when a group
// has the 8 samples a fit needs). Findings: an exception other than ConfigError (FitRefused
// is calibrate runtime's exit 1 for runs that cannot constrain a fit, DeadlineExceeded the
// target's 2 s limit), a crash, a non-finite fitted time or error.
#include <map>
#include <tuple>

#include "core/deadline.hpp"
#include "model/predict/runtime_fit.hpp"
#include "tests/fuzz/fuzz_common.hpp"
#include "topology/collective_calibration.hpp"
#include "topology/measurement_table_csv.hpp"
#include "topology/nccl_tests_parser.hpp"

namespace {

using namespace perfcast;

const std::string kSrc = PERFCAST_SOURCE_DIR;

void fit_runtime(const std::string& csv) {
  const std::string path = fuzz::scratch_file(".csv", csv);
  const std::vector<StepMeasurement> runs = read_step_measurements(path);
  try {
    const RuntimeFit fit = fit_runtime_op_overhead(kSrc + "/configs/systems/dgx_h100.json", runs, "", path);
    fuzz::require_finite_time(fit.op_overhead, "the fitted op_overhead");
    (void)fitted_runtime_json(fit, kSrc + "/configs/systems/dgx_h100.json", "fuzz", path);
  } catch (const FitRefused&) {
  }
}

/// Fits every group of >= 8 samples of one collective, rank count and node count.
void fit_comms(const std::vector<CollectiveSample>& samples, const SystemSpec& system) {
  std::map<std::tuple<int, int, int>, std::vector<CollectiveSample>> groups;
  for (const auto& s : samples) groups[{static_cast<int>(s.kind), s.ranks, s.nodes}].push_back(s);
  for (const auto& [key, group] : groups) {
    if (group.size() < 8) continue;
    const bool multi_node = std::get<2>(key) > 1;
    const CollectiveFit fit =
        multi_node ? fit_structured(group, [&](const CollectiveSample& smp) { return sample_terms(system, smp, ""); })
                   : fit_collective(group, nccl_initial_protocols(system, 1));
    for (const double e : fit_errors(fit, group))
      if (!std::isfinite(e)) {
        std::fprintf(stderr, "finding: a fitted error is %g\n", e);
        std::abort();
      }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static const SystemSpec system = parse_system(load_json_file(kSrc + "/configs/systems/dgx_h100.json"));
  const std::string text = fuzz::text_of(data + 1, size - 1);
  const ScopedDeadline limit(2.0, "the fuzz target's 2 s limit");
  fuzz::only_config_errors([&] {
    switch (data[0] % 3) {
      case 0: fit_runtime(text); break;
      case 1: fit_comms(parse_collective_log_text(text, "all_reduce_perf.txt").samples, system); break;
      default: {
        std::vector<CollectiveSample> samples;
        for (const auto& l : parse_measurement_table_csv_text(text, "table.csv"))
          samples.insert(samples.end(), l.log.samples.begin(), l.log.samples.end());
        fit_comms(samples, system);
      }
    }
  });
  return 0;
}
