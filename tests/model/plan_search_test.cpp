#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>

#include "model/graph/memory_estimate.hpp"
#include "model/plan_search/plan_search.hpp"

using namespace perfcast;

namespace {

std::string src(const std::string& rel) { return std::string(PERFCAST_SOURCE_DIR) + "/" + rel; }

/// GPT-2 124M on 4 GPUs of a DGX H100, global batch 16, micro-batches 1 and 2.
PlanSearchRequest small_request() {
  PlanSearchRequest r;
  r.base.system = src("configs/systems/dgx_h100.json");
  r.base.workload = src("configs/workloads/gpt2.json");
  r.base.overrides = {"workload.global_batch=16"};
  r.gpus = 4;
  r.space.micro_batches = {1, 2};
  r.threads = 2;
  return r;
}

}  // namespace

TEST_CASE("resize_overrides: whole nodes, or part of one node", "[plan]") {
  SystemSpec s;
  s.gpus_per_node = 8;
  s.nodes = 1;
  CHECK(resize_overrides(s, 8).empty());
  CHECK(resize_overrides(s, 16) == std::vector<std::string>{"system.nodes=2"});
  CHECK(resize_overrides(s, 4) == std::vector<std::string>{"system.nodes=1", "system.gpus_per_node=4"});
  CHECK_THROWS_AS(resize_overrides(s, 12), ConfigError);
  CHECK_THROWS_AS(resize_overrides(s, 0), ConfigError);
}

TEST_CASE("plan search: hand-counted space of GPT-2 on 4 GPUs", "[plan]") {
  const PlanSearchResult r = search_parallel_plans(small_request());
  // tp in {1,2,4} x pp | 12 with tp x pp | 4: (1,1) (1,2) (1,4) (2,1) (2,2) (4,1); dp = 4 2 1 2 1 1.
  // x micro-batch {1,2} (16 % (mb x dp) == 0 for all) x distributed optimizer {off, on where
  // dp > 1} x overlapped gradient reduction {off, on where dp > 1} x TP communication overlap
  // {off, on where tp > 1}, per micro-batch: (1,1) 2x2, (1,2) 2x2, (1,4) 1, (2,1) 2x2x2,
  // (2,2) 2, (4,1) 2 = 21; x 2 micro-batches = 42; x 3 recompute settings = 126.
  // GPT-2 fits everywhere, so recompute none is kept and the other 84 are dominated.
  CHECK(r.gpus == 4);
  CHECK(r.ranked.size() == 42);
  CHECK(r.rejected.size() == 84);
  CHECK(r.not_run.empty());
  for (const auto& rej : r.rejected) CHECK(rej.rejected.rfind("dominated", 0) == 0);
  for (std::size_t k = 1; k < r.ranked.size(); ++k) {
    CHECK(r.ranked[k - 1].iteration_time <= r.ranked[k].iteration_time);
    CHECK_FALSE(r.ranked[k].why_slower.empty());
  }
  CHECK(r.ranked[0].why_slower.empty());
  // The file's own parallelism (tp 1 pp 1, micro-batch 8) is not in the micro-batch list: unranked.
  CHECK(r.asked_rank == -1);
}

TEST_CASE("plan search: best equals a brute-force sweep over the same space", "[plan]") {
  const PlanSearchRequest req = small_request();
  const PlanSearchResult r = search_parallel_plans(req);
  REQUIRE_FALSE(r.ranked.empty());
  // Brute force: every choice (dominated ones included), one prediction each.
  double best = std::numeric_limits<double>::infinity();
  int predicted = 0;
  for (const int tp : {1, 2, 4}) {
    for (const int pp : {1, 2, 4}) {
      if (4 % (tp * pp) != 0) continue;
      for (const std::int64_t mb : {1, 2}) {
        for (const bool dist : {false, true}) {
          if (dist && 4 / (tp * pp) == 1) continue;
          for (const bool grad : {false, true}) {
            if (grad && 4 / (tp * pp) == 1) continue;
            for (const bool tpo : {false, true}) {
              if (tpo && tp == 1) continue;
              for (const Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                ParallelismChoice c;
                c.tp = tp;
                c.pp = pp;
                c.dp = 4 / (tp * pp);
                c.micro_batch = mb;
                c.recompute = rc;
                c.distributed_optimizer = dist;
                c.overlap_grad_reduce = grad;
                c.tp_comm_overlap = tpo;
                PredictRequest q = req.base;
                q.overrides.insert(q.overrides.end(), {"system.nodes=1", "system.gpus_per_node=4"});
                for (const auto& o : c.overrides()) q.overrides.push_back(o);
                const auto p = predict(q);
                ++predicted;
                if (memory_verdict(p->memory).empty()) best = std::min(best, p->timeline.iteration_time);
              }
            }
          }
        }
      }
    }
  }
  CHECK(predicted == 126);
  CHECK(r.ranked[0].iteration_time <= best);
  CHECK(r.ranked[0].iteration_time == best);  // the same prediction: exactly equal
}

TEST_CASE("plan search: memory prunes and a DLRM is refused", "[plan]") {
  PlanSearchRequest req;
  req.base.system = src("configs/systems/dgx_h100.json");
  req.base.workload = src("configs/workloads/gpt3_175b.json");
  req.gpus = 8;
  req.space.micro_batches = {1};
  const PlanSearchResult r = search_parallel_plans(req);
  // 175B parameters need ~2.8 TB of weights, gradients and Adam states: nothing fits on 8 GPUs.
  CHECK(r.ranked.empty());
  REQUIRE_FALSE(r.rejected.empty());
  bool any_memory = false;
  for (const auto& rej : r.rejected) any_memory = any_memory || rej.rejected.rfind("does not fit", 0) == 0;
  CHECK(any_memory);

  PlanSearchRequest dlrm;
  dlrm.base.system = src("configs/systems/dgx_h100.json");
  dlrm.base.workload = src("configs/workloads/dlrm_default.json");
  CHECK_THROWS_WITH(search_parallel_plans(dlrm), Catch::Contains("perfcast shard"));
}
