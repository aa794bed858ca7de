// Steady-state extrapolation of Transformer iterations (model/predict/steady_state.hpp):
// the counts simulated (hand-worked), the extrapolation of hand-made analyses, the
// refusal of increments that disagree, equality with the full simulation on small
// pipelines (1F1B blocking and stream-ordered, interleaved, MoE, overlapped gradient
// reduction, two nodes), and a simulation whose size does not grow with the micro-batches.
#include <map>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "model/graph/transformer_builder.hpp"
#include "model/predict/predict.hpp"
#include "model/predict/steady_state.hpp"
#include "model/report/report.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_steady_state_test {

using namespace perfcast;

namespace {

/// hidden 256, 4 heads, 8 layers, sequence 128; `micro_batches` per pipeline.
TransformerSpec pipeline_gpt(int tp, int pp, int dp, std::int64_t micro_batches) {
  TransformerSpec w = test::gpt(256, 4, 8, 128);
  w.tp = tp;
  w.pp = pp;
  w.dp = dp;
  w.global_batch = micro_batches * dp;
  w.sequence_parallel = tp > 1;
  return w;
}

/// A rank breakdown whose every time is `t`.
RankBreakdown breakdown(Seconds t) {
  RankBreakdown b;
  b.period = b.compute_busy = b.communication_busy = b.copy_busy = b.exposed_communication = t;
  b.exposed_by_group.fill(t);
  b.exposed_copy = b.host_busy = b.host_bound_idle = b.gpu_idle = b.critical_path = t;
  return b;
}

TimelineAnalysis analysis(Seconds t, int count) {
  TimelineAnalysis a;
  a.ranks = {breakdown(t), breakdown(2 * t)};
  a.critical_path = {{"mb#.layer#.mlp.fc1", t, count}, {"optimizer", 0.5, 1}};
  a.critical_path_total = t + 0.5;
  return a;
}

/// Extrapolated (steady state on, base `min_base`) against every micro-batch simulated.
void check_equal_to_full(const SystemSpec& s, const TransformerSpec& w, std::int64_t min_base) {
  const auto full = predict_transformer(s, w, {}, 3, SteadyStateOptions{false, min_base});
  const auto fast = predict_transformer(s, w, {}, 3, SteadyStateOptions{true, min_base});
  REQUIRE(fast->steady_state.has_value());
  CHECK_FALSE(full->steady_state.has_value());
  const Seconds t = full->timeline.iteration_time;
  CHECK(fast->timeline.iteration_time == Approx(t).epsilon(1e-9));
  REQUIRE(fast->analysis.ranks.size() == full->analysis.ranks.size());
  for (std::size_t r = 0; r < full->analysis.ranks.size(); ++r) {
    const auto &x = fast->analysis.ranks[r], &y = full->analysis.ranks[r];
    const std::vector<std::pair<Seconds, Seconds>> figures = {
        {x.period, y.period}, {x.compute_busy, y.compute_busy}, {x.communication_busy, y.communication_busy},
        {x.copy_busy, y.copy_busy}, {x.exposed_communication, y.exposed_communication}, {x.exposed_copy, y.exposed_copy},
        {x.host_busy, y.host_busy}, {x.host_bound_idle, y.host_bound_idle}, {x.gpu_idle, y.gpu_idle},
        {x.critical_path, y.critical_path}};
    for (const auto& [a, b] : figures) CHECK(a == Approx(b).margin(1e-9 * t));
    for (std::size_t g = 0; g < x.exposed_by_group.size(); ++g)
      CHECK(x.exposed_by_group[g] == Approx(y.exposed_by_group[g]).margin(1e-9 * t));
  }
  const NotableRanks nf = notable_ranks(fast->analysis), nb = notable_ranks(full->analysis);
  CHECK(nf.slowest == nb.slowest);
  CHECK(nf.critical == nb.critical);
  // By label: entries whose times agree to rounding may swap places.
  REQUIRE(fast->analysis.critical_path.size() == full->analysis.critical_path.size());
  std::map<std::string, CriticalPathEntry> by_label;
  for (const auto& e : fast->analysis.critical_path) by_label[e.label] = e;
  for (const auto& e : full->analysis.critical_path) {
    REQUIRE(by_label.count(e.label) == 1);
    CHECK(by_label[e.label].time == Approx(e.time).margin(1e-9 * t));
    CHECK(by_label[e.label].count == e.count);
  }
  CHECK(fast->analysis.critical_path_total == Approx(full->analysis.critical_path_total).margin(1e-9 * t));
}

}  // namespace

TEST_CASE("steady_state_plan: counts by hand", "[transformer][steady_state]") {
  TransformerSpec w = pipeline_gpt(8, 16, 8, 192);  // GPT-3 175B's 1,024-GPU layout: 192 micro-batches
  auto p = steady_state_plan(w, {});
  REQUIRE(p.has_value());
  CHECK(p->micro_batches == 192);
  CHECK(p->simulated == std::array<std::int64_t, 3>{32, 33, 34});  // 2 x pp, step 1
  CHECK(p->step == 1);
  w.vp = 2;
  w.pp = 4;
  p = steady_state_plan(w, {});  // max(16, 2 x 4) = 16, a multiple of pp
  REQUIRE(p.has_value());
  CHECK(p->simulated == std::array<std::int64_t, 3>{16, 20, 24});
  CHECK(p->step == 4);
  w.vp = 12;
  w.pp = 8;  // GPT-3 175B's recipe (pp 8, vp 12): the base does not grow with vp
  p = steady_state_plan(w, {});
  REQUIRE(p.has_value());
  CHECK(p->simulated == std::array<std::int64_t, 3>{16, 24, 32});
  SteadyStateOptions retry;
  retry.base_scale = 4;  // the second try: 4 x max(16, 2 pp)
  CHECK_FALSE(steady_state_plan(w, retry).has_value());  // 64 + 72 + 80 > 192 micro-batches
  w.global_batch = 256 * 8;
  p = steady_state_plan(w, retry);
  REQUIRE(p.has_value());
  CHECK(p->simulated == std::array<std::int64_t, 3>{64, 72, 80});
  w.vp = 2;
  w.pp = 3;
  p = steady_state_plan(w, {});  // max(16, 6) = 16 rounded up to 18
  REQUIRE(p.has_value());
  CHECK(p->simulated == std::array<std::int64_t, 3>{18, 21, 24});
  w.global_batch = 63 * 8;  // 63 = 18 + 21 + 24: three simulations would cost as much as one
  CHECK_FALSE(steady_state_plan(w, {}).has_value());
  w.global_batch = 64 * 8;
  CHECK(steady_state_plan(w, {}).has_value());
  CHECK_FALSE(steady_state_plan(w, {false, 16}).has_value());
  CHECK(with_micro_batches(w, 20).micro_batches() == 20);
  CHECK(with_micro_batches(w, 20).global_batch == 160);
}

TEST_CASE("extrapolate_analysis and increments_agree: hand-made analyses", "[transformer][steady_state]") {
  const TimelineAnalysis a0 = analysis(1.0, 4), a1 = analysis(1.25, 5), a2 = analysis(1.5, 6);
  CHECK(increments_agree(a0, a1, a2, 1.5));
  const TimelineAnalysis x = extrapolate_analysis(a1, a2, 4);  // 1.5 + 4 x 0.25
  REQUIRE(x.ranks.size() == 2);
  CHECK(x.ranks[0].period == Approx(2.5));
  CHECK(x.ranks[1].gpu_idle == Approx(5.0));  // 3 + 4 x 0.5
  CHECK(x.ranks[1].exposed_by_group[3] == Approx(5.0));
  CHECK(x.critical_path_total == Approx(3.0));
  REQUIRE(x.critical_path.size() == 2);
  CHECK(x.critical_path[0].label == "mb#.layer#.mlp.fc1");  // longest first
  CHECK(x.critical_path[0].time == Approx(2.5));
  CHECK(x.critical_path[0].count == 10);
  CHECK(x.critical_path[1].count == 1);
  CHECK(x.critical_events.empty());

  TimelineAnalysis bent = analysis(1.6, 6);  // the second increment 0.35, the first 0.25
  CHECK_FALSE(increments_agree(a0, a1, bent, 1.6));
  TimelineAnalysis miscounted = a2;
  miscounted.critical_path[0].count = 7;
  CHECK_FALSE(increments_agree(a0, a1, miscounted, 1.5));
  TimelineAnalysis label_left = a2;
  label_left.critical_path.pop_back();  // "optimizer" leaves the path
  CHECK_FALSE(increments_agree(a0, a1, label_left, 1.5));
}

TEST_CASE("steady-state extrapolation equals the full simulation", "[transformer][steady_state]") {
  const SystemSpec node = test::system("dgx_h100", "gpus_per_node", 8);
  SECTION("1F1B, host-blocking pipeline transfers (Megatron-DeepSpeed)") {
    check_equal_to_full(node, pipeline_gpt(2, 4, 1, 40), 8);
  }
  SECTION("1F1B, stream-ordered transfers (Megatron-Core), distributed optimizer, overlapped reduction") {
    TransformerSpec w = pipeline_gpt(2, 2, 2, 40);
    w.pipeline_host_blocking = false;
    w.distributed_optimizer = true;
    w.overlap_grad_reduce = true;
    check_equal_to_full(node, w, 8);
  }
  SECTION("interleaved 1F1B (vp 2): steps of pp micro-batches") {
    // Base 12: with get_batch on stage 0's first chunk only, one of a rank's breakdown figures
    // still moves by 6 us a step at base 8 (the prediction then falls back to simulating every
    // micro-batch); from base 12 the increments agree.
    TransformerSpec w = pipeline_gpt(1, 4, 2, 64);
    w.vp = 2;
    w.pipeline_host_blocking = false;
    check_equal_to_full(node, w, 12);
  }
  SECTION("interleaved 1F1B (vp 4) with context parallelism: the base does not grow with vp") {
    TransformerSpec w = pipeline_gpt(1, 2, 2, 64);
    w.vp = 4;
    w.cp = 2;
    w.pipeline_host_blocking = false;
    check_equal_to_full(node, w, 8);
  }
  SECTION("mixture of experts with expert parallelism") {
    TransformerSpec w = pipeline_gpt(1, 2, 4, 40);
    w.moe.experts = 8;
    w.moe.top_k = 2;
    w.ep = 4;
    w.pipeline_host_blocking = false;
    check_equal_to_full(node, w, 8);
  }
  SECTION("two nodes, data parallelism over the network") {
    const SystemSpec two = test::system("dgx_h100", "nodes", 2);
    check_equal_to_full(two, pipeline_gpt(4, 2, 2, 40), 8);
  }
}

TEST_CASE("steady state: increments that disagree fall back to simulating every micro-batch", "[transformer][steady_state]") {
  const SystemSpec node = test::system("dgx_h100", "gpus_per_node", 8);
  const TransformerSpec w = pipeline_gpt(2, 4, 1, 40);
  const auto full = predict_transformer(node, w, {}, 3, SteadyStateOptions{false, 8});
  const auto rejected = predict_transformer(node, w, {}, 3, SteadyStateOptions{true, 8, -1});  // never agree
  CHECK_FALSE(rejected->steady_state.has_value());
  CHECK(rejected->timeline.iteration_time == full->timeline.iteration_time);
  CHECK(rejected->timeline.events.size() == full->timeline.events.size());
  CHECK(rejected->analysis.critical_events == full->analysis.critical_events);
  CHECK(rejected->collective_model == full->collective_model);
  CHECK(rejected->provenance.size() == full->provenance.size());
}

TEST_CASE("steady state: a trace of an extrapolated prediction is refused", "[transformer][steady_state]") {
  const SystemSpec node = test::system("dgx_h100", "gpus_per_node", 8);
  const auto p = predict_transformer(node, pipeline_gpt(2, 4, 1, 64), {}, 3);
  REQUIRE(p->steady_state.has_value());
  CHECK_THROWS_WITH(check_trace_options(*p, {}), Catch::Contains("--all-micro-batches"));
}

TEST_CASE("steady state: the simulation does not grow with the micro-batches", "[transformer][steady_state]") {
  const SystemSpec node = test::system("dgx_h100", "gpus_per_node", 8);
  std::size_t ops = 0;
  Seconds previous = 0;
  for (const std::int64_t m : {64, 128, 1024}) {
    const auto p = predict_transformer(node, pipeline_gpt(2, 4, 1, m), {}, 3);
    REQUIRE(p->steady_state.has_value());
    CHECK(p->steady_state->micro_batches == m);
    CHECK(p->steady_state->simulated[0] == 16);
    std::size_t n = 0;
    for (const auto& r : p->graph.ranks) n += r.ops.size();
    if (ops != 0) CHECK(n == ops);  // the same 16 micro-batches held, whatever m is
    ops = n;
    CHECK(p->timeline.iteration_time > previous);  // more micro-batches take longer
    previous = p->timeline.iteration_time;
    CHECK(std::get<TransformerSpec>(p->workload).global_batch == m);  // the report's workload is the one asked for
  }
}

}  // namespace perfcast_test_model_steady_state_test
