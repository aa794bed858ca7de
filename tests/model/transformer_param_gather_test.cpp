// overlap_param_gather: the distributed optimizer's parameter all-gather moves into the next
// iteration's first forward, bucket by bucket; same bytes, waits for the optimizer step,
// never slower, refused without the distributed optimizer.
#include <catch2/catch.hpp>

#include "model/graph/transformer_builder.hpp"
#include "model/predict/predict.hpp"
#include "tests/model/transformer_test_support.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_transformer_param_gather_test {

using namespace perfcast;

namespace {

TransformerSpec gathered_gpt(bool overlap) {
  TransformerSpec w = test::gpt(2048, 16, 8, 2048);
  w.global_batch = 32;
  w.tp = 1;
  w.pp = 2;
  w.dp = 8;
  w.distributed_optimizer = true;
  w.overlap_grad_reduce = true;
  w.overlap_param_gather = overlap;
  w.pipeline_host_blocking = false;
  return w;
}

SystemSpec two_dgx_h100() { return test::system("dgx_h100", "nodes", 2); }

}  // namespace

TEST_CASE("overlap_param_gather: one bucket per layer in the first forward, after the last optimizer step", "[transformer][overlap]") {
  const TransformerSpec w = gathered_gpt(true);
  const ExecutionGraph g = build_transformer_graph(w, 16);
  const auto& ops = g.ranks[0].ops;
  int adam = -1;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].name == "optimizer.adam") adam = static_cast<int>(i);
  REQUIRE(adam >= 0);
  double gathered = 0;
  int buckets = 0;
  for (const Op& op : ops) {
    if (op.name.find("params.all_gather") == std::string::npos) continue;
    gathered += g.collectives[static_cast<std::size_t>(*op.collective)].desc.bytes;
    if (op.name == "params.all_gather.rest") continue;
    ++buckets;
    CHECK(op.name.rfind("mb0.layer", 0) == 0);  // stage 0 holds layers 0-3, gathered in micro-batch 0
    CHECK(op.prev_deps == std::vector<int>{adam});
    CHECK(op.deps.empty());
  }
  CHECK(buckets == 4);
  // The same bytes as the all-gather after the step: every parameter of the rank, bf16.
  CHECK(gathered == Approx(transformer_rank_parameters(w, 0) * 2));
}

TEST_CASE("overlap_param_gather is never slower, and hides the gather over two nodes", "[transformer][overlap][rule]") {
  const SystemSpec s = two_dgx_h100();
  const double off = predict_transformer(s, gathered_gpt(false))->timeline.iteration_time;
  const double on = predict_transformer(s, gathered_gpt(true))->timeline.iteration_time;
  CHECK(on < off);
}

TEST_CASE("overlap_param_gather without the distributed optimizer exits with the key", "[transformer][overlap][config]") {
  JsonDocument doc = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/workloads/gpt3_1.3b.json");
  doc.root["overlap_param_gather"] = true;
  doc.root["distributed_optimizer"] = false;
  try {
    (void)parse_transformer(doc);
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(e.pointer() == "/overlap_param_gather");
  }
}

}  // namespace perfcast_test_model_transformer_param_gather_test
