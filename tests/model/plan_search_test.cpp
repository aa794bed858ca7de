#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <map>

#include "core/json_reader.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/plan_search/plan_search.hpp"
#include "model/plan_search/search_order.hpp"
#include "tests/sanitized.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_plan_search_test {

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

TEST_CASE("plan search: options that would divide by zero are refused before the search", "[plan][hostile]") {
  const auto refused = [](auto edit) {
    PlanSearchRequest r = small_request();
    edit(r);
    CHECK_THROWS_AS(search_parallel_plans(r), ConfigError);
  };
  refused([](PlanSearchRequest& r) { r.space.context_parallel = {0}; });
  refused([](PlanSearchRequest& r) { r.space.virtual_stages = {0}; });
  refused([](PlanSearchRequest& r) { r.space.micro_batches = {2, 0}; });
  refused([](PlanSearchRequest& r) { r.space.expert_parallel = {-1}; });
  refused([](PlanSearchRequest& r) { r.space.max_tp = -1; });
  refused([](PlanSearchRequest& r) { r.space.virtual_stages = {65}; });
  refused([](PlanSearchRequest& r) { r.space.micro_batches.assign(kMaxSpaceValues + 1, 1); });
  refused([](PlanSearchRequest& r) { r.gpus = -1; });
  refused([](PlanSearchRequest& r) { r.timeout_s = std::numeric_limits<double>::quiet_NaN(); });
  SpaceOptions fine;
  fine.context_parallel = {1, 1024};
  CHECK_NOTHROW(validate_space_options(fine));
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

TEST_CASE("plan search: --vp and --cp add interleaved and context-parallel shapes", "[plan]") {
  PlanSearchRequest req = small_request();
  req.base.overrides.push_back("workload.attention=\"flash\"");  // context parallelism needs it
  req.space.virtual_stages = {1, 2};
  req.space.context_parallel = {1, 2};
  req.space.recomputes = {Recompute::kNone};
  const PlanSearchResult r = search_parallel_plans(req);
  // Shapes (tp, cp, pp, vp) with tp x cp x pp | 4, vp 2 only where pp > 1. GPT-2's 12 layers
  // split over pp x vp 2 x 2 but not 4 x 2 = 8 (pp 4, vp 2: does not divide). Per shape the
  // options as in the hand count above with dp x cp for the gradient group; micro-batches
  // must be a multiple of pp under vp 2 (16 / (mb dp): pp 2, dp 1 or 2: 8, 16, 4, 8: all even).
  int vp2 = 0, cp2 = 0, both = 0;
  for (const auto& p : r.ranked) {
    CHECK((p.choice.vp == 1 || p.choice.pp > 1));
    vp2 += p.choice.vp == 2;
    cp2 += p.choice.cp == 2;
    both += p.choice.vp == 2 && p.choice.cp == 2;
    CHECK(p.choice.tp * p.choice.cp * p.choice.pp * p.choice.dp == 4);
  }
  // vp 2: (tp, cp, pp) = (1,1,2) dp 2: 2 dist x 2 overlap = 4; (2,1,2) dp 1: 2 (TP overlap);
  // (1,2,2) dp 1, grad group 2: 4; x 2 micro-batches = 20.
  CHECK(vp2 == 20);
  // cp 2: (1,2,1) dp 2: 4; (1,2,2) vp 1 and 2: 4 + 4; (2,2,1) dp 1: 4 x 2 (TP overlap) = 8; x 2 = 40.
  CHECK(cp2 == 40);
  CHECK(both == 8);
  int not_divide = 0;
  for (const auto& rej : r.rejected) not_divide += rej.rejected.rfind("does not divide", 0) == 0;
  CHECK(not_divide > 0);  // pp 4 x vp 2 over 12 layers
}

TEST_CASE("plan search: --ep adds expert-parallel shapes for a MoE workload", "[plan][moe]") {
  PlanSearchRequest req = small_request();
  req.base.overrides.push_back(R"(workload.moe={"experts": 4, "top_k": 2})");
  req.space.expert_parallel = {1, 2, 4};
  req.space.recomputes = {Recompute::kNone};
  req.space.micro_batches = {1};
  req.space.overlap_grad_reduce = {false};
  req.space.tp_comm_overlap = {false};
  const PlanSearchResult r = search_parallel_plans(req);
  // Shapes (tp, pp) with tp x pp | 4 as above: stage ranks tp x dp = 4, 2, 1, 4, 2, 4 for
  // (1,1) (1,2) (1,4) (2,1) (2,2) (4,1). ep x expert TP (= tp) must divide them: ep 1 always;
  // ep 2 at (1,1) (1,2) (2,1); ep 4 at (1,1) only. Distributed optimizer off / on where dp > 1.
  std::map<int, int> by_ep;
  for (const auto& p : r.ranked) {
    ++by_ep[p.choice.ep];
    CHECK(p.choice.tp * p.choice.pp * p.choice.dp == 4);
    CHECK((p.choice.tp * p.choice.dp) % (p.choice.ep * p.choice.tp) == 0);
  }
  // ep 1: (1,1) 2, (1,2) 2, (1,4) 1, (2,1) 2, (2,2) 1, (4,1) 1 = 9; ep 2: (1,1) 2, (1,2) 2,
  // (2,1) 2 = 6; ep 4: (1,1) 2.
  CHECK(by_ep[1] == 9);
  CHECK(by_ep[2] == 6);
  CHECK(by_ep[4] == 2);
  for (const auto& rej : r.rejected) CHECK(rej.rejected.find("does not divide the") != std::string::npos);
  CHECK(r.rejected.size() == 3 * 9 - 17);
}

TEST_CASE("plan search: --expert-tp adds MoE parallel folding (expert TP apart from the attention's)", "[plan][moe]") {
  PlanSearchRequest req = small_request();
  req.base.overrides.push_back(R"(workload.moe={"experts": 4, "top_k": 2})");
  req.space.expert_parallel = {1, 2};
  req.space.expert_tensor_parallel = {1, 2};
  req.space.recomputes = {Recompute::kNone};
  req.space.micro_batches = {1};
  req.space.overlap_grad_reduce = {false};
  req.space.tp_comm_overlap = {false};
  req.exhaustive = true;
  const PlanSearchResult r = search_parallel_plans(req);
  // Shapes (tp, pp) and their stage ranks tp x dp: (1,1) 4, (1,2) 2, (1,4) 1, (2,1) 4, (2,2) 2,
  // (4,1) 4, with 2, 2, 1, 2, 1, 1 distributed-optimizer settings (on only where dp > 1).
  // (ep, expert TP) in {1,2}^2 must have ep x expert TP dividing the stage ranks: all four
  // where 4, three where 2 (not 2 x 2), one where 1. Fitting: 4x2 + 3x2 + 1x1 + 4x2 + 3x1 + 4x1 = 30.
  CHECK(r.ranked.size() == 30);
  CHECK(r.rejected.size() == 36 - 30);  // 9 shapes x settings x 4 (ep, expert TP) pairs
  std::map<std::pair<int, int>, int> by_pair;
  for (const auto& p : r.ranked) {
    ++by_pair[{p.choice.ep, p.choice.expert_tp()}];
    CHECK((p.choice.tp * p.choice.dp) % (p.choice.ep * p.choice.expert_tp()) == 0);
  }
  // (1,1): every shape (9); (2,1) and (1,2): stage ranks 4 or 2 (8 each); (2,2): stage ranks 4 (5).
  CHECK(by_pair[{1, 1}] == 9);
  CHECK(by_pair[{2, 1}] == 8);
  CHECK(by_pair[{1, 2}] == 8);
  CHECK(by_pair[{2, 2}] == 5);
  // Folded: attention tp 2 with expert TP 1; the label and the overrides say so.
  ParallelismChoice folded;
  folded.tp = 2;
  folded.dp = 2;
  folded.ep = 2;
  folded.etp = 1;
  CHECK(folded.label().find("ep 2 etp 1") != std::string::npos);
  const auto o = folded.overrides();
  CHECK(std::find(o.begin(), o.end(), "workload.moe.expert_tp=1") != o.end());
  bool ranked = false;
  for (const auto& p : r.ranked) ranked = ranked || (p.choice == folded);
  CHECK(ranked);
  SpaceOptions bad;
  bad.expert_tensor_parallel = {0};
  CHECK_THROWS_AS(validate_space_options(bad), ConfigError);
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

/// The ten fastest of `screened` are those of `all`, choice and time to the last bit (both are
/// full simulations), and every estimated plan ranks after them.
void check_same_top_ten(const PlanSearchResult& screened, const PlanSearchResult& all) {
  REQUIRE(screened.ranked.size() == all.ranked.size());
  REQUIRE(all.ranked.size() > 10);
  for (std::size_t k = 0; k < 10; ++k) {
    INFO("rank " << k + 1 << ": " << all.ranked[k].choice.label());
    CHECK(screened.ranked[k].choice == all.ranked[k].choice);
    CHECK(screened.ranked[k].iteration_time == all.ranked[k].iteration_time);
    CHECK_FALSE(screened.ranked[k].estimated);
  }
  std::size_t estimated = 0;
  for (const auto& p : screened.ranked) {
    if (!p.estimated) continue;
    ++estimated;
    CHECK(p.iteration_time > all.ranked[9].iteration_time);
    // The estimate against the full simulation of the same choice: within the margin.
    for (const auto& q : all.ranked)
      if (q.choice == p.choice) CHECK(p.iteration_time == Approx(q.iteration_time).epsilon(0.01));
  }
  CHECK(estimated > 0);  // the screening did spare full simulations
  CHECK(screened.full_simulations + estimated == screened.ranked.size());
  CHECK(all.short_simulations == 0);
  for (const auto& p : all.ranked) CHECK_FALSE(p.estimated);
}

TEST_CASE("plan search: screening keeps the ten fastest of simulating every candidate", "[plan][estimate]") {
  SECTION("GPT-2 on 4 GPUs, 1F1B and interleaved, context parallel") {
    PlanSearchRequest req = small_request();
    req.base.overrides = {"workload.global_batch=64", "workload.attention=\"flash\""};
    req.space.virtual_stages = {1, 2};
    req.space.context_parallel = {1, 2};
    req.space.recomputes = {Recompute::kNone};
    PlanSearchRequest all = req;
    all.exhaustive = true;
    check_same_top_ten(search_parallel_plans(req), search_parallel_plans(all));
  }
  SECTION("GPT-3 13B on 16 H100 (two DGX H100), the default space with micro-batch 1") {
    PlanSearchRequest req;
    req.base.system = src("configs/systems/dgx_h100.json");
    req.base.workload = src("configs/workloads/gpt3_13b.json");
    req.gpus = 16;
    req.space.micro_batches = {1};
    // Under the sanitizers the space without recomputation (a third of it) runs the same code.
    if (test::kSanitized) req.space.recomputes = {Recompute::kNone};
    req.threads = 2;
    PlanSearchRequest all = req;
    all.exhaustive = true;
    check_same_top_ten(search_parallel_plans(req), search_parallel_plans(all));
  }
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

TEST_CASE("search order: the workload's own choice first, then every TP size before any repeats", "[plan][order]") {
  std::vector<ParallelismChoice> choices;
  for (const int tp : {1, 2, 4, 8})
    for (const int pp : {1, 2, 4})
      for (const std::int64_t mb : {1, 2}) {
        ParallelismChoice c;
        c.tp = tp;
        c.pp = pp;
        c.dp = 64 / (tp * pp);
        c.micro_batch = mb;
        choices.push_back(c);
      }
  ParallelismChoice asked;
  asked.tp = 4;
  asked.pp = 4;
  asked.dp = 4;
  asked.micro_batch = 1;
  const auto order = search_order(choices, 512, asked);
  REQUIRE(order.size() == choices.size());
  // A permutation: every index once.
  std::vector<std::size_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) CHECK(sorted[i] == i);
  CHECK(choices[order[0]] == asked);
  // The next four cover TP 1, 2, 4, 8 in ascending order.
  for (std::size_t k = 0; k < 4; ++k) CHECK(choices[order[1 + k]].tp == (1 << k));
  // Within TP 1 the estimate prefers no pipeline (no bubble) and micro-batch 2 over 1:
  // dp 64, mb 2 -> 4 micro-batches, no bubble; hand-worked cost 1 + 0.05 + 0.02 = 1.07.
  CHECK(choices[order[1]].pp == 1);
  CHECK(estimated_relative_cost(choices[order[1]], 512) == Approx(1.07));
  // Hand-worked: tp 4 pp 4 dp 4 mb 1: m = 512 / 4 = 128 micro-batches; bubble 3/128;
  // TP 0.04 x 2; DP +0.05; micro-batch 1 +0.04.
  CHECK(estimated_relative_cost(asked, 512) == Approx(1 + 3.0 / 128 + 0.08 + 0.05 + 0.04));
}

TEST_CASE("search order: cost estimate grows with the bubble and recomputation", "[plan][order]") {
  ParallelismChoice c;
  c.tp = 2;
  c.pp = 4;
  c.dp = 2;
  c.micro_batch = 1;
  const double base = estimated_relative_cost(c, 64);
  c.vp = 2;  // interleaving halves the bubble
  CHECK(estimated_relative_cost(c, 64) < base);
  c.vp = 1;
  c.recompute = Recompute::kSelective;
  const double selective = estimated_relative_cost(c, 64);
  c.recompute = Recompute::kFull;
  CHECK(base < selective);
  CHECK(selective < estimated_relative_cost(c, 64));
  CHECK(estimated_relative_cost(c, 64) < estimated_relative_cost(c, 8));  // fewer micro-batches, bigger bubble
}

TEST_CASE("plan search: a search cut by its time limit says what it covered", "[plan][order]") {
  PlanSearchResult r;
  RankedPlan a;
  a.choice.tp = 1;
  r.ranked.push_back(a);
  a.choice.tp = 2;
  r.ranked.push_back(a);
  ParallelismChoice n;
  n.tp = 4;
  r.not_run = {n, n};
  const SearchCoverage c = search_coverage(r);
  CHECK(c.candidates == 4);
  CHECK(c.predicted == 2);
  CHECK(c.not_run == 2);
  CHECK_FALSE(c.complete());
  CHECK(c.tp_sizes == std::vector<int>{1, 2, 4});
  CHECK(c.tp_sizes_predicted == std::vector<int>{1, 2});
}

}  // namespace perfcast_test_model_plan_search_test
