// Speed of `perfcast plan`'s parallelism search on one thread, and whether its screening
// keeps the ranking of a search that simulates every candidate in full:
//   taskset -c 0 build/bench/perfcast_bench_plan [--exhaustive] [--reps N]
// Case: GPT-3 175B (global batch 1,536, sequence 2,048) on 1,024 H100 (128 DGX H100 nodes,
// NDR InfiniBand), the default space (tp 1-8, every pp dividing 96 layers, micro-batch
// 1/2/4/8, three recompute settings, distributed optimizer, both overlaps): 1,656 choices,
// the problem of docs/transformers.md that Calculon's search was compared on.
// Prints, per run: the search's wall-clock time, the screening part (reading, the memory
// and shape screen, the estimates) and the rates in choices per second; with --exhaustive
// it also runs the full search and compares the ten fastest plans (choice and time).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "model/plan_search/plan_search.hpp"

using namespace perfcast;

namespace {

PlanSearchRequest gpt3_175b_on_1024(bool exhaustive) {
  const std::string src = PERFCAST_SOURCE_DIR;
  PlanSearchRequest req;
  req.base.system = src + "/configs/systems/cluster_4x_dgx_h100.json";
  req.base.workload = src + "/configs/workloads/gpt3_175b.json";
  req.base.overrides = {"workload.global_batch=1536"};
  req.gpus = 1024;
  req.threads = 1;
  req.exhaustive = exhaustive;
  return req;
}

/// CPU time of the process so far, s (user + system): steadier than wall-clock time on a
/// shared machine.
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

std::size_t choices(const PlanSearchResult& r) { return r.ranked.size() + r.rejected.size() + r.not_run.size(); }

void print(const char* label, const PlanSearchResult& r, double cpu_seconds) {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double n = static_cast<double>(choices(r));
  std::printf("%-10s %zu choices, %zu candidates: %zu short simulations, %zu in full; search %.2f s (%.0f choices/s; "
              "%.2f s of CPU), screening %.2f s (%.0f choices/s); fastest %s %.4f s; peak RSS so far %.0f MiB\n",
              label, choices(r), r.ranked.size(), r.short_simulations, r.full_simulations, r.seconds, n / r.seconds, cpu_seconds,
              r.screen_seconds, r.screen_seconds > 0 ? n / r.screen_seconds : 0.0,
              r.ranked.empty() ? "-" : r.ranked[0].choice.label().c_str(), r.ranked.empty() ? 0.0 : r.ranked[0].iteration_time,
              double(u.ru_maxrss) / 1024.0);
}

}  // namespace

int main(int argc, char** argv) {
  bool exhaustive = false;
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--exhaustive") exhaustive = true;
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--exhaustive] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  std::printf("perfcast plan: GPT-3 175B on 1,024 H100, one thread\n");
  PlanSearchResult screened;
  for (int i = 0; i < reps; ++i) {
    const double cpu0 = process_cpu_seconds();
    screened = search_parallel_plans(gpt3_175b_on_1024(false));
    print("screened", screened, process_cpu_seconds() - cpu0);
  }
  if (!exhaustive) return 0;
  const double cpu0 = process_cpu_seconds();
  const PlanSearchResult all = search_parallel_plans(gpt3_175b_on_1024(true));
  print("exhaustive", all, process_cpu_seconds() - cpu0);
  int same = 0;
  const std::size_t top = std::min<std::size_t>({10, all.ranked.size(), screened.ranked.size()});
  for (std::size_t k = 0; k < top; ++k) {
    const bool equal = all.ranked[k].choice == screened.ranked[k].choice && all.ranked[k].iteration_time == screened.ranked[k].iteration_time;
    same += equal ? 1 : 0;
    std::printf("  %2zu %-80s %.6f s %s\n", k + 1, all.ranked[k].choice.label().c_str(), all.ranked[k].iteration_time,
                equal ? "same" : ("screened: " + screened.ranked[k].choice.label()).c_str());
  }
  // The largest error of the estimates against the full simulation of the same candidate.
  double worst = 0;
  for (const auto& p : screened.ranked) {
    if (!p.estimated) continue;
    for (const auto& q : all.ranked)
      if (q.choice == p.choice) worst = std::max(worst, std::abs(p.iteration_time / q.iteration_time - 1));
  }
  std::printf("top %zu: %d of %zu the same; largest estimate error %.4f%%\n", top, same, top, worst * 100);
  return same == static_cast<int>(top) ? 0 : 1;
}
