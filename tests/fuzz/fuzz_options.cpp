// The option spaces of `predict --compare/--sweep`, `plan` and `shard`, as the command line
// and Python pass them to the library. The first byte picks the command; each further line
// is one option value. Every run has a 2 s limit (core/deadline.hpp) so that a large but
// valid space is cut, as --timeout would cut it. Findings: any exception other than
// ConfigError or DeadlineExceeded, a crash (a division by zero: plan --cp 0 was SIGFPE), a
// sanitizer report, a non-finite or negative time.
#include <sstream>
#include <vector>

#include "core/deadline.hpp"
#include "model/commands/shard_command.hpp"
#include "model/plan_search/plan_search.hpp"
#include "model/predict/predict_grid.hpp"
#include "tests/fuzz/fuzz_common.hpp"

namespace {

using namespace perfcast;

const std::string kSrc = PERFCAST_SOURCE_DIR;

/// Integers of a comma list ("1,2,x" -> 1, 2; a value that is not one is skipped), at most 80.
template <class T>
std::vector<T> integers(const std::string& text) {
  std::vector<T> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',') && out.size() < 80;) {
    try {
      out.push_back(static_cast<T>(std::stoll(item)));
    } catch (const std::exception&) {
    }
  }
  return out;
}

void sweep(const std::vector<std::string>& lines) {
  PredictRequest base;
  base.system = kSrc + "/configs/systems/dgx_h100.json";
  base.workload = kSrc + "/configs/workloads/dlrm_default.json";
  base.iterations = 2;
  std::vector<GridAxis> axes;
  for (const auto& l : lines) axes.push_back(parse_grid_axis(l, "--sweep"));
  const std::vector<GridPoint> points = expand_grid(base, axes);
  // The first two points, as `predict --sweep --threads 1` runs them.
  const std::vector<GridPoint> first(points.begin(), points.begin() + std::min<std::size_t>(points.size(), 2));
  for (const auto& p : run_grid(first, 1)) {
    if (p) fuzz::require_finite_time(p->timeline.iteration_time, "a grid point's iteration time");
  }
}

void plan(const std::vector<std::string>& lines) {
  PlanSearchRequest req;
  req.base.system = kSrc + "/configs/systems/dgx_h100.json";
  req.base.workload = kSrc + "/configs/workloads/gpt2.json";
  req.threads = 1;
  const auto line = [&](std::size_t i) { return i < lines.size() ? lines[i] : std::string(); };
  if (!line(0).empty()) req.space.micro_batches = integers<std::int64_t>(line(0));
  req.space.context_parallel = integers<int>(line(1));
  req.space.virtual_stages = integers<int>(line(2));
  req.space.expert_parallel = integers<int>(line(3));
  const auto scalars = integers<long long>(line(4));
  if (!scalars.empty()) req.space.max_tp = static_cast<int>(scalars[0]);
  if (scalars.size() > 1) req.gpus = static_cast<int>(scalars[1]);
  if (scalars.size() > 2) req.timeout_s = static_cast<double>(scalars[2]) * 1e-3;
  if (scalars.size() > 3) req.exhaustive = scalars[3] != 0;
  req.space.expert_tensor_parallel = integers<int>(line(5));
  const PlanSearchResult r = search_parallel_plans(req);
  for (const auto& p : r.ranked) fuzz::require_finite_time(p.iteration_time, "a ranked plan's iteration time");
}

void shard(const std::vector<std::string>& lines) {
  ShardRequest req;
  req.system = load_json_file(kSrc + "/configs/systems/dgx_h100.json");
  req.workload = load_json_file(kSrc + "/configs/workloads/dlrm_default.json");
  const auto line = [&](std::size_t i) { return i < lines.size() ? lines[i] : std::string(); };
  req.budget = line(0).empty() ? "10s" : line(0);
  const auto n = integers<long long>(line(1));
  req.evaluations = n.empty() ? 2 : static_cast<std::size_t>(std::max(1LL, n[0] % 5));  // at most 4 plans
  req.seed = n.size() > 1 ? static_cast<std::uint64_t>(n[1]) : 1;
  req.timeout = line(2);
  if (!line(3).empty()) req.memory_tiers = line(3);
  if (!line(4).empty()) req.dense_layout = line(4);
  req.plan_format = plan_format_from_name(line(5).empty() ? "perfcast" : line(5));
  const ShardOutcome out = run_shard(std::move(req));
  if (out.json.empty() || out.plan.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::vector<std::string> lines;
  std::istringstream in(fuzz::text_of(data + 1, size - 1));
  for (std::string l; std::getline(in, l) && lines.size() < 8;) lines.push_back(l);
  const ScopedDeadline limit(2.0, "the fuzz target's 2 s limit");
  fuzz::only_config_errors([&] {
    switch (data[0] % 3) {
      case 0: sweep(lines); break;
      case 1: plan(lines); break;
      default: shard(lines); break;
    }
  });
  return 0;
}
