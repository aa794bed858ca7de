// The interleaved 1F1B schedule (parallelism.vp > 1): every send meets a receive, the warmup
// counts of Megatron's schedule, no deadlock on the ring of stages, the smaller bubble, the
// activation memory and the config errors.
#include <map>
#include <set>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "model/graph/transformer_builder.hpp"
#include "model/predict/predict.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_interleaved_test {

using namespace perfcast;

namespace {

TransformerSpec chunked_gpt(int pp, int vp, std::int64_t micro_batches, int layers) {
  TransformerSpec w = test::gpt(1024, 16, layers, 1024);
  w.global_batch = micro_batches;
  w.tp = 1;
  w.pp = pp;
  w.vp = vp;
  w.dp = 1;
  w.symmetric_simulation = false;
  w.pipeline_host_blocking = false;  // Megatron-Core
  return w;
}

SystemSpec dgx_h100(int gpus) { return test::system("dgx_h100", "gpus_per_node", gpus); }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_CASE("interleaved: every send has its receive on the other side, and the ring does not deadlock", "[transformer][interleaved]") {
  for (int pp : {2, 3, 4}) {
    for (int vp : {2, 3}) {
      for (int m : {pp, 2 * pp}) {
        CAPTURE(pp, vp, m);
        const TransformerSpec w = chunked_gpt(pp, vp, m, pp * vp * 2);
        const ExecutionGraph g = build_transformer_graph(w, pp);
        // Per directed group {from, to}: parts the sender sends and the receiver receives.
        std::map<int, int> sent, received;
        for (int r = 0; r < pp; ++r) {
          for (const Op& op : g.ranks[static_cast<std::size_t>(r)].ops) {
            if (!op.concurrent) continue;
            const int grp = g.collectives[static_cast<std::size_t>(*op.collective)].group;
            const auto& members = g.groups[static_cast<std::size_t>(grp)].ranks;
            const std::string label = op.name.substr(op.name.rfind('.') + 1);  // send_next, recv_prev, ...
            const bool sends = label.rfind("send_", 0) == 0;
            CHECK(members[sends ? 0 : 1] == r);
            (sends ? sent : received)[grp]++;
          }
        }
        CHECK(sent == received);
        // Activations go around the ring vp times per micro-batch: (pp x vp - 1) hops forward
        // and as many back.
        int total = 0;
        for (const auto& [grp, n] : sent) total += n;
        CHECK(total == 2 * m * (pp * vp - 1));
        CHECK(predict_transformer(dgx_h100(pp), w)->timeline.iteration_time > 0);
      }
    }
  }
}

TEST_CASE("interleaved: stage s runs (pp - s - 1) x 2 + (vp - 1) x pp warmup forwards", "[transformer][interleaved]") {
  const int pp = 4, vp = 2, m = 8;
  const ExecutionGraph g = build_transformer_graph(chunked_gpt(pp, vp, m, 16), pp);
  for (int s = 0; s < pp; ++s) {
    // Forward chunk passes ("mbK.cV." prefixes) before the first backward op: the warmup
    // forwards plus the first steady-state forward.
    std::set<std::string> forwards;
    for (const Op& op : g.ranks[static_cast<std::size_t>(s)].ops) {
      if (op.phase == Phase::kBackward) break;
      const auto second_dot = op.name.find('.', op.name.find('.') + 1);
      if (op.phase == Phase::kForward && op.name.rfind("mb", 0) == 0) forwards.insert(op.name.substr(0, second_dot));
    }
    CHECK(static_cast<int>(forwards.size()) == (pp - s - 1) * 2 + (vp - 1) * pp + 1);
  }
}

TEST_CASE("interleaved: every rank runs each micro-batch of each chunk once forward and once backward", "[transformer][interleaved]") {
  const int pp = 4, vp = 3, m = 8;
  const ExecutionGraph g = build_transformer_graph(chunked_gpt(pp, vp, m, 24), pp);
  for (int s = 0; s < pp; ++s) {
    std::set<std::string> forward, backward;
    int forward_ops = 0, backward_ops = 0;
    for (const Op& op : g.ranks[static_cast<std::size_t>(s)].ops) {
      if (op.name.rfind("mb", 0) != 0) continue;
      const auto second_dot = op.name.find('.', op.name.find('.') + 1);
      const std::string pass = op.name.substr(0, second_dot);  // "mbK.cV"
      if (ends_with(op.name, ".qkv") && op.phase == Phase::kForward) forward.insert(pass), ++forward_ops;
      if (ends_with(op.name, ".backward.qkv")) backward.insert(pass), ++backward_ops;
    }
    // 8 micro-batches x 3 chunks, each with 24 / (4 x 3) = 2 layers.
    CHECK(forward.size() == std::size_t(m * vp));
    CHECK(backward.size() == std::size_t(m * vp));
    CHECK(forward_ops == m * vp * 2);
    CHECK(backward_ops == m * vp * 2);
  }
}

TEST_CASE("interleaved: overlapped p2p communication hides transfers between nodes", "[transformer][interleaved][rule]") {
  // pp 4 with one GPU per node: every chunk boundary crosses the network. Overlapping costs
  // one more host call per step (the forward and backward transfers become two calls), so
  // it only pays where the transfers are worth hiding, as here.
  const SystemSpec s = test::system("cluster_4x_dgx_h100", "gpus_per_node", 1);
  TransformerSpec overlapped = chunked_gpt(4, 2, 8, 32);
  TransformerSpec waited = overlapped;
  waited.overlap_p2p_comm = false;
  CHECK(predict_transformer(s, overlapped)->timeline.iteration_time < predict_transformer(s, waited)->timeline.iteration_time);
}

TEST_CASE("interleaved: chunk v of stage s holds layers of virtual stage v x pp + s", "[transformer][interleaved]") {
  const ExecutionGraph g = build_transformer_graph(chunked_gpt(2, 2, 2, 8), 2);
  std::set<std::string> stage1;
  for (const Op& op : g.ranks[1].ops)
    if (op.phase == Phase::kForward && op.name.rfind("mb0.c", 0) == 0 && ends_with(op.name, ".qkv")) stage1.insert(op.name);
  // 8 layers over 4 virtual stages of 2: stage 1 holds layers 2-3 (chunk 0) and 6-7 (chunk 1).
  CHECK(stage1 == std::set<std::string>{"mb0.c0.layer2.qkv", "mb0.c0.layer3.qkv", "mb0.c1.layer6.qkv", "mb0.c1.layer7.qkv"});
}

TEST_CASE("interleaved: the pipeline bubble shrinks with the chunks, the compute does not", "[transformer][interleaved][rule]") {
  // pp 4 with as many micro-batches as stages: the 1F1B bubble is (pp - 1) / (M + pp - 1) of
  // the step; with vp chunks it is (pp - 1) / vp micro-batch slots (Narayanan et al. 2021).
  // Stages of equal work (a small vocabulary, so the LM head adds little to the last) and
  // layers large enough that the transfers are small beside them.
  const SystemSpec s = dgx_h100(4);
  double previous = 1e30, bubble1 = 0;
  for (int vp : {1, 2, 4}) {
    TransformerSpec w = chunked_gpt(4, vp, 4, 32);
    w.hidden = 4096;
    w.heads = w.kv_heads = 32;
    w.ffn_hidden = 16384;
    w.seq_len = 2048;
    w.vocab = 1024;
    const auto p = predict_transformer(s, w);
    const double t = p->timeline.iteration_time;
    double busy = 0, exposed = 0;  // the busiest rank's compute; the most exposed transfers
    for (const auto& r : p->analysis.ranks) busy = std::max(busy, r.compute_busy), exposed = std::max(exposed, r.exposed_communication);
    const double bubble = t - busy - exposed;
    CAPTURE(vp, t, busy, bubble);
    CHECK(t < previous);
    if (vp == 1) bubble1 = bubble;
    // Theory: bubble(vp) = bubble(1) / vp, besides the exposed transfers (vp times as many);
    // within 10%.
    else CHECK(bubble == Approx(bubble1 / vp).epsilon(0.10));
    previous = t;
  }
}

TEST_CASE("interleaved: stage 0 keeps (1 + (pp - 1) / (pp vp)) of 1F1B's activations", "[transformer][interleaved][memory]") {
  const SystemSpec s = dgx_h100(4);
  TransformerSpec one = chunked_gpt(4, 1, 16, 16);
  TransformerSpec two = chunked_gpt(4, 2, 16, 16);
  resolve_parallelism(one, 4);
  resolve_parallelism(two, 4);
  const double a1 = estimate_transformer_memory(one, s)[0].activations;
  const double a2 = estimate_transformer_memory(two, s)[0].activations;
  // 1F1B: 4 micro-batches x 4 layers in flight; interleaved: 3 x 2 + 1 x 4 + 1 = 11 virtual
  // micro-batches of 2 layers: 22 / 16 = 1.375.
  CHECK(a2 / a1 == Approx(1.375).epsilon(1e-9));
}

TEST_CASE("interleaved: symmetric simulation equals the full one", "[transformer][interleaved][symmetry]") {
  TransformerSpec w = chunked_gpt(2, 2, 4, 8);
  w.tp = 2;
  w.dp = 2;
  w.global_batch = 8;
  TransformerSpec mirrored = w;
  mirrored.symmetric_simulation = true;
  const SystemSpec s = dgx_h100(8);
  CHECK(predict_transformer(s, mirrored)->timeline.iteration_time == predict_transformer(s, w)->timeline.iteration_time);
}

TEST_CASE("interleaved: config errors name the path", "[transformer][interleaved][config]") {
  const auto message = test::parallelism_error;
  TransformerSpec no_pipeline = chunked_gpt(1, 2, 4, 8);
  CHECK(message(no_pipeline, 1) == "/parallelism/vp: virtual stages (vp 2) need pp >= 2");
  CHECK(message(chunked_gpt(2, 3, 4, 8), 2) == "/parallelism/vp: 8 layers do not divide over pp 2 x vp 3 model chunks");
  CHECK(message(chunked_gpt(4, 2, 6, 16), 4) ==
        "/parallelism/vp: the interleaved schedule needs the micro-batch count (6) to be a multiple of pp 4");
}

}  // namespace perfcast_test_model_transformer_interleaved_test
