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

/// Fits every group of >= 8 samples as calibrate comms groups them: one collective, one
/// node class (one node, or several: a structured fit) and one forced algorithm (NCCL_ALGO
/// of a table's rows; "" for NCCL's choice).
void fit_comms(const std::vector<std::pair<CollectiveSample, std::string>>& samples, const SystemSpec& system) {
  std::map<std::tuple<int, bool, std::string>, std::vector<CollectiveSample>> groups;
  for (const auto& [s, forced] : samples) groups[{static_cast<int>(s.kind), s.nodes > 1, forced}].push_back(s);
  for (const auto& [key, group] : groups) {
    if (group.size() < 8) continue;
    const std::string& forced = std::get<2>(key);
    const CollectiveFit fit =
        std::get<1>(key) ? fit_structured(group, [&](const CollectiveSample& smp) { return sample_terms(system, smp, forced); })
                         : fit_collective(group, nccl_initial_protocols(system, 1));
    // Each sample's fitted time, as calibrate comms computes it (a structured fit from the
    // sample's spec-derived terms).
    for (const auto& smp : group) {
      const double t = fit.structured() ? fit.structured_time(sample_terms(system, smp, forced), smp.bytes)
                                        : fit.time(smp.bytes, smp.ranks);
      fuzz::require_finite_time(t, "a fitted collective time");
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
      case 1: {
        std::vector<std::pair<CollectiveSample, std::string>> samples;
        for (const auto& s : parse_collective_log_text(text, "all_reduce_perf.txt").samples) samples.emplace_back(s, "");
        fit_comms(samples, system);
        break;
      }
      default: {
        std::vector<std::pair<CollectiveSample, std::string>> samples;
        for (const auto& l : parse_measurement_table_csv_text(text, "table.csv"))
          for (const auto& s : l.log.samples) samples.emplace_back(s, l.forced_algorithm);
        fit_comms(samples, system);
      }
    }
  });
  return 0;
}
