// Sharding search throughput: plans simulated per second and wall time to plan, on one
// core: `taskset -c 0 build/bench/perfcast_bench_shard` (`--scratch`: without incremental
// evaluation; `--phases`: where a from-scratch evaluation's time goes; `--check`: exact
// results, to compare before and after a change; `--memory-tiers`: the search may also put
// tables in host memory, as `shard --memory-tiers on`). Case 4, dlrm_mlperf on one H100,
// always searches with memory tiers (nothing fits in HBM). Case 5: DLRM-DCNv2 on 16 DGX H100
// (128 GPUs). `--stability`: a 10 s and a 60 s search at 64 and 128 GPUs, compared;
// `--phases-128`: where a from-scratch evaluation's time goes at 128 GPUs. `--moves`: per kind of
// local-search move, the proposals, how many improved on the best plan, and the median change
// of the iteration time against the best plan of the moment (cache hits included).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <string>

#include "model/graph/dlrm_builder.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/sharding/shard_search.hpp"
#include "model/sim/simulator.hpp"
#include "topology/collective_calibration.hpp"

using namespace perfcast;

namespace {

/// false (`--scratch`): every plan built and annotated from scratch, the evaluator before
/// incremental rebuilds; the search and its results are the same.
bool g_incremental = true;
/// `--check`: also print the best time to the last bit and a digest of every evaluated
/// plan's time and verdict, to show that a speed-up changed no result.
bool g_check = false;
/// `--memory-tiers`: baselines and local moves with host-memory tables.
bool g_tiers = false;
/// `--moves`: the table of local-search moves after each case.
bool g_moves = false;

/// FNV-1a over the bits of every evaluation the search makes, in order (proposes nothing).
class Digest final : public Proposer {
 public:
  std::optional<Candidate> propose() override { return std::nullopt; }
  void feedback(const Candidate&, const PlanEvaluation& e) override {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &e.iteration_time, sizeof bits);
    mix(bits);
    mix(e.feasible ? 1 : 0);
    for (const Seconds t : e.rank_embedding_time) {
      std::memcpy(&bits, &t, sizeof bits);
      mix(bits);
    }
    for (const Bytes b : e.rank_memory) {
      std::memcpy(&bits, &b, sizeof bits);
      mix(bits);
    }
  }
  std::uint64_t value = 1469598103934665603ull;

 private:
  void mix(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) value = (value ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
};

/// Per kind of local-search move ("local:<moves>"): proposals, improvements on the best plan
/// and the relative change against the best plan of the moment (proposes nothing).
class MoveStats final : public Proposer {
 public:
  std::optional<Candidate> propose() override { return std::nullopt; }
  void feedback(const Candidate& c, const PlanEvaluation& e) override {
    if (c.origin.rfind("local:", 0) == 0 && best_ < 1e30) {
      Kind& k = kinds_[c.origin.substr(6)];
      k.changes.push_back(e.iteration_time / best_ - 1);
      k.improved += e.feasible && e.iteration_time < best_ ? 1 : 0;
    }
    if (e.feasible) best_ = std::min(best_, e.iteration_time);
  }
  void print(std::size_t evaluations) {
    std::size_t proposals = 0;
    for (auto& [name, k] : kinds_) proposals += k.changes.size();
    std::printf("  local-search moves: %zu proposals; %zu plans evaluated in all, baselines included (a proposal of a plan "
                "already evaluated is answered from the cache)\n", proposals, evaluations);
    std::printf("  %-36s %9s %9s %14s\n", "move", "proposals", "improved", "median change");
    for (auto& [name, k] : kinds_) {
      auto& v = k.changes;
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
      std::printf("  %-36s %9zu %9zu %+13.2f%%\n", name.c_str(), v.size(), k.improved, 100 * v[v.size() / 2]);
    }
  }

 private:
  struct Kind {
    std::vector<double> changes;
    std::size_t improved = 0;
  };
  std::map<std::string, Kind> kinds_;
  double best_ = 1e30;
};

/// CPU time of the calling thread, s (unlike wall time, not inflated by other processes
/// sharing the core).
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void run(const char* label, const SystemSpec& s, const DlrmSpec& w, std::size_t evaluations, bool tiers = g_tiers) {
  const auto comm = make_collective_model(s);
  PlanEvaluator ev(s, w, *comm);
  const auto baselines = baseline_plans(w, s, 1, tiers);
  double best_baseline = 1e30;
  for (const auto& b : baselines) {
    const auto e = ev.evaluate(b.plan);
    if (e.feasible) best_baseline = std::min(best_baseline, e.iteration_time);
  }
  PlanEvaluator search_ev(s, w, *comm, 3, g_incremental);
  FixedPlansProposer fixed(baselines);
  LocalSearchProposer local(w, s, 1, tiers);
  SearchOptions opt;
  opt.max_evaluations = evaluations;
  Digest digest;
  std::vector<Proposer*> proposers{&fixed, &local};
  if (g_check) proposers.push_back(&digest);
  MoveStats moves;
  if (g_moves) proposers.push_back(&moves);
  const double cpu0 = thread_cpu_s();
  const SearchResult r = run_search(proposers, search_ev, opt);
  const double cpu_s = thread_cpu_s() - cpu0;
  std::printf("%-44s%s tables %4zu ranks %3d  %6zu plans in %6.2f s = %7.0f plans/s  best %.3f ms vs best baseline %.3f ms (%+.1f%%)\n",
              label, tiers ? " [memory tiers]" : "", w.tables.size(), s.world_size(), r.evaluations, r.wall_s, r.evaluations / r.wall_s,
              r.best_eval.iteration_time * 1e3, best_baseline * 1e3, (r.best_eval.iteration_time / best_baseline - 1) * 100);
  std::printf("  %.0f plans per CPU second (this thread's CPU time %.2f s; differs from the wall time on a loaded machine)\n",
              r.evaluations / cpu_s, cpu_s);
  const double plans = static_cast<double>(std::max<std::size_t>(1, search_ev.evaluations()));
  std::printf("  per plan: %.1f of %d ranks simulated (the others mirror one with the same shards), %.1f rebuilt; "
              "%.0f%% of plans rebuilt the whole graph\n",
              static_cast<double>(search_ev.ranks_simulated()) / plans, s.world_size(),
              static_cast<double>(search_ev.ranks_rebuilt()) / plans, 100.0 * static_cast<double>(search_ev.whole_rebuilds()) / plans);
  if (g_moves) moves.print(r.evaluations);
  if (g_check) {
    std::printf("  check: best %.17g s, best baseline %.17g s, digest of all %zu evaluations %016llx\n",
                r.best_eval.iteration_time, best_baseline, r.evaluations, static_cast<unsigned long long>(digest.value));
  }
}

/// Keeps every plan the search evaluates (proposes nothing).
class Keep final : public Proposer {
 public:
  std::optional<Candidate> propose() override { return std::nullopt; }
  void feedback(const Candidate& c, const PlanEvaluation&) override { plans.push_back(c.plan); }
  std::vector<ShardingPlan> plans;
};

/// Where one plan evaluation's time goes: the pipeline's phases timed separately over the
/// plans of a short search (graph build, annotation with a warm estimate cache, the
/// simulation, the memory model), microseconds per plan.
void phases(const char* label, const SystemSpec& s, const DlrmSpec& w, std::size_t evaluations) {
  const auto comm = make_collective_model(s);
  PlanEvaluator ev(s, w, *comm);
  FixedPlansProposer fixed(baseline_plans(w, s, 1));
  LocalSearchProposer local(w, s, 1);
  Keep keep;
  SearchOptions opt;
  opt.max_evaluations = evaluations;
  (void)run_search({&fixed, &local, &keep}, ev, opt);
  using Clock = std::chrono::steady_clock;
  auto us = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  Annotator annotator(s, *comm);
  double t_build = 0, t_annotate = 0, t_sim = 0, t_mem = 0, sink = 0;
  for (const auto& p : keep.plans) {
    const auto a = Clock::now();
    const ExecutionGraph g = build_dlrm_graph(w, p, s.world_size(), s.gpus_per_node);
    const auto b = Clock::now();
    const TimedGraph t = annotator.annotate(g);
    const auto c = Clock::now();
    sink += simulate(t, s.host).iteration_time;
    const auto d = Clock::now();
    sink += memory_verdict(estimate_memory(w, p, s)).size();
    const auto e = Clock::now();
    t_build += us(b - a);
    t_annotate += us(c - b);
    t_sim += us(d - c);
    t_mem += us(e - d);
  }
  const double n = static_cast<double>(keep.plans.size());
  std::printf("%-44s per plan: build %.1f us, annotate %.1f us, simulate %.1f us, memory %.1f us (%zu plans, %g)\n", label,
              t_build / n, t_annotate / n, t_sim / n, t_mem / n, keep.plans.size(), sink > 0 ? 1.0 : 0.0);
}

/// 500 tables with rows log-uniform in 1e3..1e7, D 64, pooling 1..50, half Zipf.
DlrmSpec synthetic_500(const DlrmSpec& base) {
  DlrmSpec w = base;
  w.name = "synthetic 500 tables";
  w.bottom_mlp = {512, 256, 64};
  w.tables.clear();
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  for (int t = 0; t < 500; ++t) {
    const auto rows = static_cast<std::int64_t>(std::pow(10.0, 3 + 4 * u(rng)));
    const double pooling = 1 + std::floor(49 * u(rng));
    w.tables.push_back({"t" + std::to_string(t), rows, 64, pooling,
                        t % 2 ? IndexDistribution::zipf(1.05) : IndexDistribution::uniform()});
  }
  return w;
}

/// `system` grown to `nodes` nodes.
SystemSpec with_nodes(const std::string& file, int nodes) {
  JsonDocument doc = load_json_file(file);
  apply_override(doc, "nodes", std::to_string(nodes));
  return parse_system(doc);
}

/// `--stability`: the same search (seed 1) with a 10 s and a 60 s budget, as `perfcast shard
/// --budget 10s` and `--budget 60s` run it (baselines, then the local search), on 8 and 16
/// DGX H100 nodes: how far the 10 s answer is from the 60 s one.
void stability(const SystemSpec& s, const DlrmSpec& w, const char* label) {
  double best[2] = {0, 0};
  std::size_t plans[2] = {0, 0};
  const double budgets[2] = {10, 60};
  for (int k = 0; k < 2; ++k) {
    const auto comm = make_collective_model(s);
    PlanEvaluator ev(s, w, *comm);
    FixedPlansProposer fixed(baseline_plans(w, s, 1));
    LocalSearchProposer local(w, s, 1);
    SearchOptions opt;
    opt.budget_s = budgets[k];
    const SearchResult r = run_search({&fixed, &local}, ev, opt);
    best[k] = r.best_eval.iteration_time;
    plans[k] = r.evaluations;
  }
  std::printf("%-44s --budget 10s: %.3f ms (%zu plans); --budget 60s: %.3f ms (%zu plans); 10 s is %+.2f%% from 60 s\n", label,
              best[0] * 1e3, plans[0], best[1] * 1e3, plans[1], (best[0] / best[1] - 1) * 100);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string src = PERFCAST_SOURCE_DIR;
  const SystemSpec dgx = load_system(src + "/configs/systems/dgx_h100.json");
  const DlrmSpec t64 = load_workload(src + "/bench/dlrm_64tables.json");
  if (argc > 1 && std::string(argv[1]) == "--phases") {
    phases("64-table DLRM on dgx_h100", dgx, t64, 2000);
    return 0;
  }
  const DlrmSpec dcnv2 = load_workload(src + "/configs/workloads/dlrm_dcnv2_mlperf.json");
  const std::string dgx_file = src + "/configs/systems/dgx_h100.json";
  if (argc > 1 && std::string(argv[1]) == "--stability") {
    stability(with_nodes(dgx_file, 8), dcnv2, "dlrm_dcnv2_mlperf on 8x dgx_h100 (64 GPUs)");
    stability(with_nodes(dgx_file, 16), dcnv2, "dlrm_dcnv2_mlperf on 16x dgx_h100 (128 GPUs)");
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--phases-128") {
    phases("dlrm_dcnv2_mlperf on 16x dgx_h100", with_nodes(dgx_file, 16), dcnv2, 300);
    return 0;
  }
  int only = 0;  // `--case N`: run only the N-th case (1-5), e.g. under a profiler
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--scratch") g_incremental = false;
    if (std::string(argv[i]) == "--check") g_check = true;
    if (std::string(argv[i]) == "--memory-tiers") g_tiers = true;
    if (std::string(argv[i]) == "--moves") g_moves = true;
    if (std::string(argv[i]) == "--case" && i + 1 < argc) only = std::stoi(argv[++i]);
  }
  if (only == 0 || only == 1) run("64-table DLRM on dgx_h100", dgx, t64, 5000);
  const DlrmSpec mlperf = load_workload(src + "/configs/workloads/dlrm_mlperf.json");
  if (only == 0 || only == 2) run("dlrm_mlperf on dgx_h100", dgx, mlperf, 5000);
  if (only == 0 || only == 4) run("dlrm_mlperf on one H100", load_system(src + "/configs/systems/h100_sxm.json"), mlperf, 5000, true);
  if (only == 0 || only == 5) run("dlrm_dcnv2_mlperf on 16x dgx_h100", with_nodes(dgx_file, 16), dcnv2, 3000);
  if (only != 0 && only != 3) return 0;
  JsonDocument doc = load_json_file(src + "/configs/systems/cluster_4x_dgx_h100.json");
  apply_override(doc, "nodes", "8");
  const SystemSpec c64 = parse_system(doc);
  run("synthetic 500-table DLRM on 8x dgx_h100", c64, synthetic_500(t64), 300);
  return 0;
}
