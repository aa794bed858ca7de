#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "core/json_text.hpp"
#include "core/run_context.hpp"
#include "core/utc_time.hpp"
#include "model/commands/calibrate_command.hpp"
#include "perfcast/build_info.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/measurement.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {
namespace {

/// Keeps only the families named in `families` (all when empty); ConfigError naming one
/// that was not fitted.
void keep_families(KernelCalibration& cal, const std::vector<std::string>& families) {
  if (families.empty()) return;
  std::vector<std::string> fitted;
  for (const auto& f : cal.fits) fitted.push_back(f.family);
  for (const auto& name : families) {
    if (!cal.find(name))
      throw ConfigError("--families", "",
                        fmt::format("\"{}\" was not fitted (fitted: {}); a family needs 10 training measurements", name,
                                    fmt::join(fitted, ", ")));
  }
  std::erase_if(cal.fits,
                [&](const FamilyFit& f) { return std::find(families.begin(), families.end(), f.family) == families.end(); });
}

/// configs/calibration/<gpu>.json beside the folder of the system file.
std::string default_calibration_path(const std::string& system_file, const std::string& gpu) {
  return (std::filesystem::path(system_file).parent_path() / ".." / "calibration" / calibration_file_name(gpu))
      .lexically_normal()
      .string();
}

}  // namespace

CalibrateOutcome calibrate_kernels(const CalibrateKernelsRequest& k) {
  if (k.measurements.empty()) throw ConfigError("--measurements", "", "expected at least one measurement file");
  const SystemSpec s = load_system(k.system);
  std::vector<Measurement> all;
  for (const auto& path : k.measurements) {
    auto ms = read_measurements(path);
    all.insert(all.end(), ms.begin(), ms.end());
  }
  KernelCalibration cal;
  try {
    cal = fit_kernel_calibration(all, s.gpu);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(k.measurements.front(), "", e.what());
  }
  keep_families(cal, k.families);
  cal.date = utc_today();
  cal.commit = build_info::kGitCommit;
  cal.measurements = k.measurements;
  cal.note = k.note;
  CalibrateOutcome outcome;
  outcome.out = k.out.empty() ? default_calibration_path(k.system, s.gpu.name) : k.out;
  std::string text = fmt::format("kernel calibration for {} from {} measurements of {}\n{:<18} {:>10} {:>10} {:>10} {:>7} {:>7} {:>9} {:>9}\n",
                                 s.gpu.name, all.size(), cal.gpu, "family", "e_compute", "e_memory", "overhead", "train", "held",
                                 "train err", "held err");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& f : cal.fits) {
    text += fmt::format("{:<18} {:>10.3f} {:>10.3f} {:>8.2f}us {:>7} {:>7} {:>8.2f}% {:>8.2f}%\n", f.family, f.compute_efficiency,
                        f.memory_efficiency, f.overhead * 1e6, f.train_samples, f.heldout_samples,
                        f.train_geomean_abs_error * 100, f.heldout_geomean_abs_error * 100);
    rows.push_back({{"family", f.family}, {"heldout_geomean_abs_error", f.heldout_geomean_abs_error},
                    {"train_geomean_abs_error", f.train_geomean_abs_error}, {"heldout_samples", f.heldout_samples}});
  }
  outcome.content = kernel_calibration_to_json(cal);
  std::vector<std::string> inputs{k.system};
  inputs.insert(inputs.end(), k.measurements.begin(), k.measurements.end());
  nlohmann::json context = command_context("calibrate kernels", inputs);
  context.update({{"system", s.name}, {"gpu", s.gpu.name}, {"measured_gpu", cal.gpu}, {"calibration_file", outcome.out}});
  const nlohmann::json j = {{"context", context},
                            {"families", rows},
                            {"written", outcome.out}};
  outcome.json = json_text(j, 2) + "\n";
  outcome.text = std::move(text);
  return outcome;
}

}  // namespace perfcast
