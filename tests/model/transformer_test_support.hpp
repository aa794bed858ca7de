#pragma once
/// Shared by the Transformer tests: a small decoder workload to adjust, a system file sized
/// to the test, and the "path: message" of a parallelism that does not resolve.
#include <cstdint>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "model/graph/execution_graph.hpp"
#include "model/graph/transformer_builder.hpp"
#include "model/graph/transformer_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast::test {

/// A GPT-like decoder: `heads` query and kv heads, ffn 4 x hidden, GPT-2's vocabulary, bf16,
/// micro-batch 1, global batch 8, tp = pp = dp = 1.
inline TransformerSpec gpt(std::int64_t hidden, std::int64_t heads, std::int64_t layers, std::int64_t seq) {
  TransformerSpec w;
  w.name = "test";
  w.file = "test.json";
  w.hidden = hidden;
  w.heads = w.kv_heads = heads;
  w.layers = layers;
  w.seq_len = seq;
  w.vocab = 50257;
  w.ffn_hidden = 4 * hidden;
  w.precision = DType::kBf16;
  w.micro_batch = 1;
  w.global_batch = 8;
  return w;
}

/// gpt(64, 4, 2, 32) on `tp` tensor-parallel ranks (dp 1, sequence parallel when tp > 1), no dropout.
inline TransformerSpec small_decoder(int tp) {
  TransformerSpec w = gpt(64, 4, 2, 32);
  w.tp = tp;
  w.dp = 1;
  w.sequence_parallel = tp > 1;
  w.dropout = 0;
  return w;
}

/// Stored activation bytes of the first stage of `changed` minus those of `base`, both resolved
/// on `world` GPUs of `s`.
inline double first_stage_activation_change(TransformerSpec changed, TransformerSpec base, const SystemSpec& s, int world) {
  resolve_parallelism(changed, world);
  resolve_parallelism(base, world);
  return estimate_transformer_memory(changed, s).at(0).activations - estimate_transformer_memory(base, s).at(0).activations;
}

/// configs/systems/<stem>.json with `key` (e.g. "gpus_per_node" or "nodes") set to `value`.
inline SystemSpec system(const std::string& stem, const std::string& key, int value) {
  JsonDocument doc = load_json_file(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/" + stem + ".json");
  apply_override(doc, key, std::to_string(value));
  return parse_system(doc);
}

/// "JSON path: message" of resolve_parallelism's error on `world` GPUs, or "no error".
inline std::string parallelism_error(TransformerSpec w, int world) {
  try {
    resolve_parallelism(w, world);
  } catch (const ConfigError& e) {
    return fmt::format("{}: {}", e.pointer(), e.message());
  }
  return "no error";
}

/// The attention kernel of rank 0's op `name`, or null when the op has none.
inline const AttentionDesc* attention_of(const ExecutionGraph& g, const std::string& name) {
  for (const auto& op : g.ranks[0].ops)
    if (op.name == name)
      for (const auto& k : op.kernels)
        if (const auto* a = std::get_if<AttentionDesc>(&k)) return a;
  return nullptr;
}

/// The first GEMM of rank 0's op `name`; fails the test when there is none.
inline const GemmDesc& first_gemm(const ExecutionGraph& g, const std::string& name) {
  for (const auto& op : g.ranks[0].ops)
    if (op.name == name)
      for (const auto& k : op.kernels)
        if (const auto* gm = std::get_if<GemmDesc>(&k)) return *gm;
  FAIL("no GEMM in op " << name);
  static GemmDesc none;
  return none;
}

/// Checks the m x n x k of the first GEMM of rank 0's op `name`.
inline void check_first_gemm(const ExecutionGraph& g, const std::string& name, std::int64_t m, std::int64_t n, std::int64_t k) {
  INFO(name);
  const GemmDesc& gm = first_gemm(g, name);
  CHECK(gm.m == m);
  CHECK(gm.n == n);
  CHECK(gm.k == k);
}


/// "JSON path: message" of parse_transformer's error on the workload text, or "no error".
inline std::string workload_error(const std::string& workload_json) {
  try {
    (void)parse_transformer(JsonDocument{nlohmann::json::parse(workload_json), "w.json"});
  } catch (const ConfigError& e) {
    return e.pointer() + ": " + e.message();
  }
  return "no error";
}

}  // namespace perfcast::test
