// A whole DLRM iteration against a measured one: PARAM's traced TorchRec DLRM test job
// (8x V100, data/param-dlrm-v100-8rank/, ProfilerStep#10 of every rank) rebuilt as
// a perfcast workload (configs/workloads/param_dlrm_v100.json, the trace's shapes in its "sources"; its plan bench/param_dlrm_v100_plan.json), predicted
// on configs/systems/dgx1_v100.json with a runtime profile, against each rank's measured step.
//
//   perfcast_param_dlrm_check [--runtime NAME]... [--fit 1] [--max-held-out-error X] [--json FILE]
//
// The step is host-bound (the GPU computes about 1 ms of a 12.5-19.9 ms step), so it measures
// the framework's host cost per step. Ranks 0-3 are the fit part, ranks 4-7 the held-out
// part (the same step of the same job: a weak split; no second DLRM job in data/
// can be expressed as a perfcast workload). --fit 1 grids runtime.host.op_overhead over
// 50-1000 us in 5 us steps on pytorch_eager and prints the value whose prediction is closest
// to the fit ranks' mean step. --max-held-out-error X: exit 1 when the first --runtime's
// |error| against the held-out ranks' mean step exceeds X (a fraction). --json: the errors per
// runtime against both halves (bench/accuracy_json.hpp).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bench/accuracy_json.hpp"
#include "model/predict/predict.hpp"
#include "model/traces/kineto_trace.hpp"

using namespace perfcast;

namespace {

const std::string kSource = PERFCAST_SOURCE_DIR;

/// Each rank's measured ProfilerStep span, by rank; every one of the 8 ranks must be traced
/// once (a missing rank would bias the means of ranks 0-3 and 4-7).
std::vector<Seconds> measured_steps(const std::string& archive) {
  std::vector<Seconds> out(8, 0.0);
  std::vector<bool> seen(8, false);
  for (const KinetoTrace& t : load_kineto_traces({archive})) {
    if (!t.rank || *t.rank < 0 || *t.rank >= 8 || t.steps.empty()) throw std::runtime_error(t.file + ": no rank or step");
    const auto r = static_cast<std::size_t>(*t.rank);
    if (seen[r]) throw std::runtime_error(fmt::format("{}: rank {} is traced twice", archive, r));
    seen[r] = true;
    out[r] = t.step_wall(0);
  }
  for (std::size_t r = 0; r < seen.size(); ++r)
    if (!seen[r]) throw std::runtime_error(fmt::format("{}: no trace of rank {}", archive, r));
  return out;
}

Seconds predicted_step(const std::vector<std::string>& overrides) {
  const auto p = predict_documents(load_json_file(kSource + "/configs/systems/dgx1_v100.json"),
                                   load_json_file(kSource + "/configs/workloads/param_dlrm_v100.json"),
                                   load_json_file(kSource + "/bench/param_dlrm_v100_plan.json"), overrides, 3);
  return p->timeline.iteration_time;
}

Seconds mean(const std::vector<Seconds>& v, std::size_t first, std::size_t n) {
  double s = 0;
  for (std::size_t i = first; i < first + n; ++i) s += v[i];
  return s / double(n);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"PARAM's TorchRec DLRM step (8x V100) against perfcast's prediction of the same model"};
  std::vector<std::string> runtimes{"torchrec", "pytorch_eager"};
  int fit = 0;
  double max_error = -1;
  std::string data = kSource + "/data/param-dlrm-v100-8rank/dlrm_kineto.tar.gz";
  std::string json_out;
  app.add_option("--runtime", runtimes, "runtime profiles to predict with (the first is checked by --max-held-out-error)");
  app.add_option("--fit", fit, "1: grid runtime.host.op_overhead on pytorch_eager against the fit ranks 0-3");
  app.add_option("--max-held-out-error", max_error, "exit 1 when the first runtime's held-out |error| exceeds this fraction");
  app.add_option("--data", data, "the PARAM Kineto archive");
  app.add_option("--json", json_out, "write the errors per runtime as JSON to FILE (- for standard output)");
  CLI11_PARSE(app, argc, argv);
  if (!std::filesystem::exists(data)) {
    std::fprintf(stderr, "%s not found\n", data.c_str());
    return 2;
  }
  const std::vector<Seconds> measured = measured_steps(data);
  const Seconds fit_mean = mean(measured, 0, 4), held_mean = mean(measured, 4, 4);
  std::printf("measured ProfilerStep#10 per rank (ms):");
  for (const Seconds m : measured) std::printf(" %.3f", m * 1e3);
  std::printf("\n  mean of ranks 0-3 (fit) %.3f ms, of ranks 4-7 (held out) %.3f ms\n\n", fit_mean * 1e3, held_mean * 1e3);

  if (fit) {
    double best = 0, best_error = 1e9;
    for (int us = 50; us <= 1000; us += 5) {
      const Seconds t = predicted_step({"runtime=pytorch_eager", fmt::format("runtime.host.op_overhead={}us", us)});
      if (std::abs(t / fit_mean - 1) < best_error) {
        best_error = std::abs(t / fit_mean - 1);
        best = us;
      }
    }
    const Seconds t = predicted_step({"runtime=pytorch_eager", fmt::format("runtime.host.op_overhead={}us", best)});
    std::printf("fit: op_overhead %.0f us: %.3f ms, %+.2f%% against ranks 0-3, %+.2f%% against ranks 4-7 (held out)\n\n", best,
                t * 1e3, (t / fit_mean - 1) * 100, (t / held_mean - 1) * 100);
  }

  std::printf("%-16s %12s %14s %18s\n", "runtime", "predicted", "vs ranks 0-3", "vs ranks 4-7 (held out)");
  double first_error = 0;
  std::map<std::string, std::vector<double>> subsets;
  nlohmann::json values = {{"measured_fit_mean_s", fit_mean}, {"measured_held_out_mean_s", held_mean}, {"measured_s", measured}};
  for (std::size_t i = 0; i < runtimes.size(); ++i) {
    const Seconds t = predicted_step({fmt::format("runtime={}", runtimes[i])});
    subsets[runtimes[i] + "_fit_ranks_0_3"] = {t / fit_mean - 1};
    subsets[runtimes[i] + "_held_out_ranks_4_7"] = {t / held_mean - 1};
    values["predicted_s"][runtimes[i]] = t;
    std::printf("%-16s %9.3f ms %+13.2f%% %+17.2f%%\n", runtimes[i].c_str(), t * 1e3, (t / fit_mean - 1) * 100,
                (t / held_mean - 1) * 100);
    if (i == 0) first_error = std::abs(t / held_mean - 1);
  }
  bench::write_accuracy_json(json_out, "param_dlrm_v100", subsets, values);
  if (max_error >= 0 && first_error > max_error) {
    std::printf("FAIL: %s held-out |error| %.2f%% > %.2f%%\n", runtimes.front().c_str(), first_error * 100, max_error * 100);
    return 1;
  }
  return 0;
}
