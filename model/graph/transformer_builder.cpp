/// \file transformer_builder.cpp
/// build_transformer_graph: each rank's program from the rank passes
/// (transformer_rank_passes.hpp) in the 1F1B pipeline schedule (or the interleaved one,
/// transformer_interleaved_schedule.cpp); the parameters and the
/// memory estimate of a rank.

#include "model/graph/transformer_builder.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "model/graph/transformer_rank_passes.hpp"

namespace perfcast {
namespace transformer {
namespace {

void run_passes(const auto& passes, const TransformerRankContext& c, TransformerDraft& d) {
  for (const NamedTransformerPass& pass : passes) pass.run(c, d);
}

void forward_micro_batch(const TransformerRankContext& c, TransformerDraft& d, int mb) {
  d.set_micro_batch(mb);
  run_passes(kForwardPasses, c, d);
}

void backward_micro_batch(const TransformerRankContext& c, TransformerDraft& d, int mb) {
  d.set_micro_batch(mb);
  run_passes(kBackwardPasses, c, d);
}

}  // namespace

RankProgram build_transformer_rank_program(const TransformerSpec& w, int rank, SharedCollectives& shared) {
  const TransformerRankContext c(w, rank, shared);
  TransformerDraft d(c, shared);
  const int P = w.pp, s = c.stage;
  const double bytes = c.p2p_bytes;
  const auto M = static_cast<int>(w.micro_batches());
  const int warmup = std::min(P - s - 1, M);
  const int steady = M - warmup;
  // Warmup: forwards only, each received from the previous stage and sent to the next.
  for (int i = 0; i < warmup; ++i) {
    if (s > 0) d.p2p("recv_forward", Phase::kForward, c.prev_group, {{0, bytes, 0, 0}});
    forward_micro_batch(c, d, i);
    if (s + 1 < P) d.p2p("send_forward", Phase::kForward, c.next_group, {{0, bytes, 0, 0}});
  }
  // Steady state: one forward, one backward.
  if (steady > 0 && s > 0) d.p2p("recv_forward", Phase::kForward, c.prev_group, {{0, bytes, 0, 0}});
  for (int i = 0; i < steady; ++i) {
    forward_micro_batch(c, d, warmup + i);
    if (s + 1 < P) d.p2p("send_forward_recv_backward", Phase::kForward, c.next_group, {{0, bytes, bytes, 0}});
    backward_micro_batch(c, d, i);
    if (s > 0) {
      if (i == steady - 1) {
        d.p2p("send_backward", Phase::kBackward, c.prev_group, {{0, 0, bytes, 0}});
      } else {
        d.p2p("send_backward_recv_forward", Phase::kBackward, c.prev_group, {{0, bytes, bytes, 0}});
      }
    }
  }
  // Cooldown: the warmup's backwards.
  for (int i = 0; i < warmup; ++i) {
    if (s + 1 < P) d.p2p("recv_backward", Phase::kBackward, c.next_group, {{0, 0, bytes, 0}});
    backward_micro_batch(c, d, steady + i);
    if (s > 0) d.p2p("send_backward", Phase::kBackward, c.prev_group, {{0, 0, bytes, 0}});
  }
  d.clear_micro_batch();
  run_passes(kOptimizerPasses, c, d);
  return std::move(d.program);
}

}  // namespace transformer

double transformer_layer_parameters(const TransformerSpec& w, std::int64_t layer) {
  if (w.diffusion()) return dit_layer_parameters(w, w.tp);
  const double t = w.tp, h = double(w.hidden);
  const double f1 = fc1_multiplier(w.activation) * double(w.ffn_hidden);
  // MoE: the router (replicated over TP), the rank's experts and its TP share of the shared
  // experts, without biases.
  const double mlp = w.moe.in_layer(layer) ? h * w.moe.experts + transformer_layer_expert_parameters(w, layer) + w.shared_expert_parameters() / t
                                           : (h + 1) * f1 / t + double(w.ffn_hidden) * h / t + h;
  return w.attention_parameters(w.tp) + mlp + 4 * h;
}

std::vector<std::int64_t> transformer_stage_layers(const TransformerSpec& w, int stage) {
  std::vector<std::int64_t> out;
  for (int v = 0; v < w.vp; ++v) {
    const std::int64_t first = w.chunk_first_layer(stage, v), n = w.chunk_layer_count(stage, v);
    for (std::int64_t i = 0; i < n; ++i) out.push_back(first + i);
  }
  return out;
}

double transformer_stage_layer_parameters(const TransformerSpec& w, int stage) {
  double p = 0;
  for (const std::int64_t l : transformer_stage_layers(w, stage)) p += transformer_layer_parameters(w, l);
  return p;
}

double transformer_stage_expert_parameters(const TransformerSpec& w, int stage) {
  double p = 0;
  for (const std::int64_t l : transformer_stage_layers(w, stage)) p += transformer_layer_expert_parameters(w, l);
  return p;
}

double transformer_rank_parameters(const TransformerSpec& w, int stage) {
  const double t = w.tp, h = double(w.hidden);
  double p = transformer_stage_layer_parameters(w, stage);
  if (w.diffusion()) return p + (stage == 0 ? dit_input_parameters(w) : 0.0) + (stage + 1 == w.pp ? dit_output_parameters(w) : 0.0);
  const double table = double(w.padded_vocab()) / t * h;
  if (stage == 0) p += table + (w.position == PositionEmbedding::kLearned ? double(w.seq_len) * h : 0.0);
  if (stage + 1 == w.pp) {
    p += 2 * h;
    if (!w.tied_embeddings || w.pp > 1) p += table;
  }
  return p;
}

ExecutionGraph build_transformer_graph(const TransformerSpec& w, int world) {
  if (w.stage_ranks() * w.pp != world) {
    throw ConfigError(w.file, "/parallelism",
                      fmt::format("tp x cp x pp x dp = {} but the system has {} GPUs", w.stage_ranks() * w.pp, world));
  }
  ExecutionGraph g;
  transformer::SharedCollectives shared{g, {}, {}, {}};
  g.ranks.reserve(static_cast<std::size_t>(world));
  const int replicas = w.stage_ranks();  // ranks per stage
  const bool mirror = w.symmetric_simulation && replicas > 1;
  for (int r = 0; r < world; ++r) {
    const int representative = r / replicas * replicas;  // tp index 0, dp index 0 of r's stage
    if (mirror) g.mirror_of.push_back(representative);
    if (!mirror || representative == r) {
      g.ranks.push_back(w.vp > 1 ? transformer::build_interleaved_rank_program(w, r, shared)
                                 : transformer::build_transformer_rank_program(w, r, shared));
    }
    else g.ranks.emplace_back();
  }
  return g;
}

namespace {

/// Bytes per element of the input a linear layer keeps for its weight gradient: 2 (the bf16
/// input itself, shared with whatever else keeps it), or 1 under FP8, where Transformer
/// Engine's Linear and LayerNormLinear keep the FP8 cast of their input (or its FP8
/// transpose) and not the bf16 tensor (TransformerEngine v1.8, the release of NeMo 24.07:
/// transformer_engine/pytorch/module/linear.py `saved_inputmat`, layernorm_linear.py `ln_out`
/// allocated as uint8 under FP8 and passed to save_for_backward).
double fp8_gemm_input_bytes(const TransformerSpec& w) { return w.fp8_linear_layers() ? 1.0 : 2.0; }

/// Bytes of the dense MLP's stored activations per layer and micro-batch at 2-byte elements,
/// `sbh` this rank's tokens x hidden, split over TP: fc1's input (2 sbh, replicated without
/// sequence parallelism and counted in layer_activation_bytes), fc1's output (2 sbh f1 / h;
/// f1 = 2 f for gated activations) and the activation's output that fc2 keeps (2 sbh f / h);
/// 16 sbh at f = 4h with GeLU, Korthikanti et al.'s table 2. Under FP8 fc2 keeps the FP8 cast
/// of its input (1 B an element; fp8_gemm_input_bytes), and the activation's bf16 output is
/// not kept.
double dense_mlp_activation_bytes(const TransformerSpec& w, double sbh) {
  const double f = double(w.ffn_hidden) / double(w.hidden);
  return sbh * (2 * fc1_multiplier(w.activation) * f + fp8_gemm_input_bytes(w) * f);
}

/// Stored activations of one layer and micro-batch at 2-byte elements on one of `t` TP ranks
/// (`sbh`: the rank's sequence share x micro-batch x hidden), what Megatron-Core with
/// Transformer Engine keeps for the backward (Korthikanti et al. 2022 table 2 with flash
/// attention, generalised as Megatron's theoretical_memory_usage does): the two norms' inputs
/// (2 sbh each), the QKV and fc1 inputs (2 sbh each), the dropout masks after attention and
/// after the MLP (sbh each, with dropout) — all split over TP only under sequence parallelism —
/// and, split over TP, Q, K and V (2 sbh each for K and V scaled by kv heads / heads), the
/// attention output the projection keeps (2 sbh) and the MLP's (dense_mlp_activation_bytes);
/// the attention's terms scale by heads x head_dim / hidden where "head_dim" sets it.
/// GPT (f = 4h, GeLU, dropout): 34 sbh / t with sequence parallelism, sbh (10 + 24 / t) without.
/// Under FP8 (fp8_gemm_input_bytes) the QKV and fc1 inputs are FP8 casts (sbh each), the
/// projection keeps an FP8 cast of the attention output beside the bf16 output flash
/// attention keeps (3 sbh for the two), and fc2's input is FP8: 29 sbh / t for that GPT.
double layer_activation_bytes(const TransformerSpec& w, double sbh, double t) {
  const double masks = w.dropout > 0 ? 2.0 : 0.0;
  const double gemm_input = fp8_gemm_input_bytes(w);
  // --recompute-modules layernorm discards the norms' bf16 outputs (the QKV and fc1 inputs);
  // under FP8 the linears keep their own FP8 casts of them, which stay.
  const bool norm_outputs_kept = !(w.recomputes_norms() && !w.fp8_linear_layers());
  const double replicated = sbh * (4 + (norm_outputs_kept ? 2 * gemm_input : 0) + masks);
  const double kv = double(w.kv_heads) / double(w.heads);
  const double a = double(w.attention_width()) / double(w.hidden);  // 1 unless head_dim says otherwise
  const double projection_input = w.fp8_linear_layers() ? 2 + gemm_input : 2;
  const double split = sbh * a * (2 * (1 + 2 * kv) + projection_input) + dense_mlp_activation_bytes(w, sbh);
  return (w.sequence_parallel ? replicated / t : replicated) + split / t;
}

/// A diffusion layer's stored activations per micro-batch at 2-byte elements on one of `t`
/// TP ranks, counted as for layer_activation_bytes from what each sub-block keeps for its
/// backward. Per sub-block, on the sequence-parallel shard (split over TP only under sequence
/// parallelism): the norm's input, the modulated output (the next GEMM's input) and the
/// branch output the gate's gradient reads, 2 sbh each (18 sbh for the three). Split over TP:
/// self-attention's Q, K, V and output (2 sbh x (2 + 2 kv / heads)), the cross-attention's
/// query and output (4 sbh) and the text keys and values (2 x 2 b s_text h), the MLP's fc1
/// and GeLU outputs (dense_mlp_activation_bytes). The flash kernels' softmax statistics and
/// the per-sample modulation values are negligible.
double dit_layer_activation_bytes(const TransformerSpec& w, double sbh, double t) {
  const double replicated = 18 * sbh;
  const double kv = double(w.kv_heads) / double(w.heads);
  const double a = double(w.attention_width()) / double(w.hidden);  // 1 unless head_dim says otherwise
  const double text = 4.0 * double(w.micro_batch) * double(w.dit.text_tokens) * double(w.attention_width());
  const double split = sbh * a * (2 * (2 + 2 * kv) + 4) + text + dense_mlp_activation_bytes(w, sbh);
  return (w.sequence_parallel ? replicated / t : replicated) + split / t;
}

/// MoE layers: the change in bytes of stored activations per layer and micro-batch when the
/// dense MLP's share (dense_mlp_activation_bytes and its dropout mask) is replaced by the MoE
/// MLP's: the router input (sbh / tp elements), each routed row's permuted input, fc1 output
/// and activation output (elements), and the 1-byte dropout mask. Under FP8 the experts' and
/// shared experts' GEMM inputs (the permuted rows, the activation outputs, the shared experts'
/// input) are kept as FP8 casts, 1 B each (fp8_gemm_input_bytes; Transformer Engine's grouped
/// and plain Linear keep their FP8 inputs).
/// MoE runs with sequence parallelism under TP (parse check): every term is this rank's share.
double moe_activation_bytes_change(const TransformerSpec& w, double sbh) {
  const double t = w.tp, e = dtype_bytes(w.activation_dtype());
  const double q = w.fp8_linear_layers() ? fp8_gemm_input_bytes(w) : e;  // bytes of a kept GEMM input element
  const double mask = w.dropout > 0 ? sbh / t : 0.0;  // bytes
  const double dense_mlp = (dense_mlp_activation_bytes(w, sbh) / t) * (e / 2) + mask;
  const double tokens = sbh / double(w.hidden) / t;  // rows this rank routes
  const int etp = w.expert_tp();
  const double rows = tokens * w.moe.top_k * etp * w.moe.load_factor();  // rows its local experts process
  const double gate = fc1_multiplier(w.activation);
  const double ffn = double(w.expert_ffn()) / etp;
  // --recompute-modules moe_act discards the activation's bf16 output (fc2's input; under
  // FP8 fc2 keeps its own FP8 cast), and layernorm the norm's output the router keeps.
  const bool bf16_discard = !w.fp8_linear_layers();
  const double act_out = w.recomputes_moe_act() && bf16_discard ? 0.0 : q * ffn;
  const double router_in = w.recomputes_norms() && bf16_discard ? 0.0 : e * sbh / t;
  const double per_row = q * double(w.hidden) + e * gate * ffn + act_out;  // bytes
  // Shared experts: a TP MLP over every token; its sequence-parallel input and its fc1 and
  // activation outputs (this rank's width share) are kept.
  const double sf = double(w.moe.shared_ffn) / t;
  const double shared = w.moe.shared_ffn > 0 ? q * sbh / t + tokens * t * (e * gate * sf + q * sf) : 0.0;
  return rows * per_row + router_in + mask + shared - dense_mlp;
}

/// Multi-latent attention against the formula's attention at 2-byte activations, per layer
/// and micro-batch (`sb`: this rank's tokens): the formula keeps Q, K, V and the output
/// projection's input, 2 sbh / t bytes each; MLA's are n x d_qk (Q, K) and n x d_v (V, the
/// projection's input) wide. MLA also keeps its latents (query, key-value and rotary key)
/// and their norms' outputs on every TP rank, 2 x 2 B per element.
double mla_activation_bytes_change(const TransformerSpec& w, double sb) {
  const double t = w.tp, n = double(w.heads);
  const double qkvo = 2.0 * sb * n * (2.0 * double(w.qk_dim()) + 2.0 * double(w.v_dim())) / t;
  const double latents = 4.0 * sb * double(w.mla.q_lora_rank + w.mla.kv_lora_rank + w.mla.qk_rope_head_dim);
  return qkvo + latents - 8.0 * sb * double(w.hidden) / t;
}

}  // namespace

std::vector<RankMemory> estimate_transformer_memory(const TransformerSpec& w, const SystemSpec& s, const MemoryOptions& o) {
  std::vector<RankMemory> out;
  const int world = s.world_size();
  const double e = dtype_bytes(w.activation_dtype());  // bf16 under FP8: weights and activations stay bf16
  const bool mixed = e < 4;
  // Weights: bf16, plus under FP8 Transformer Engine's FP8 copy and its transpose (1 B each);
  // with fp8_param_gather the weights are FP8 themselves (1 B and the cached transpose, 1 B).
  const double weight_bytes = !w.fp8_linear_layers() ? e : w.fp8_param_gather ? 2.0 : e + 2.0;
  // Megatron-Core's gradient buffer: fp32 with grad_reduce_in_fp32, else the parameters' type.
  const double grad_bytes = dtype_bytes(w.grad_reduce_dtype);
  const double sbh = double(w.seq_len / w.cp) * w.micro_batch * w.hidden;  // this rank's share of the sequence
  const double t = w.tp;
  const double attn = 5.0 * w.heads * w.seq_len / w.hidden;  // the a*s/h score terms
  const bool keep_scores = w.attention == AttentionImpl::kUnfused && w.recompute != Recompute::kFull && !w.recomputes_core_attention();
  const double sp = w.sequence_parallel ? t : 1.0;
  // Bytes per layer per micro-batch at 2-byte activations.
  double per_layer = w.diffusion() ? dit_layer_activation_bytes(w, sbh, t) : layer_activation_bytes(w, sbh, t);
  if (keep_scores) per_layer += sbh * attn / t;
  if (w.mla.enabled()) per_layer += mla_activation_bytes_change(w, sbh / w.hidden);
  per_layer *= e / 2;
  const double moe_change = w.moe.enabled() ? moe_activation_bytes_change(w, sbh) : 0.0;
  const double checkpoint = 2 * sbh / sp * (e / 2);  // the layer input kept under full recompute
  const auto M = w.micro_batches();
  // Every rank of a pipeline stage holds the same: computed once per stage, copied per rank.
  std::vector<std::optional<RankMemory>> by_stage(static_cast<std::size_t>(std::max(w.pp, 1)));
  for (int r = 0; r < world; ++r) {
    const int stage = r / w.stage_ranks();
    if (auto& known = by_stage[static_cast<std::size_t>(stage)]) {
      RankMemory copy = *known;
      copy.rank = r;
      out.push_back(std::move(copy));
      continue;
    }
    const double params = transformer_rank_parameters(w, stage);
    RankMemory m;
    m.rank = r;
    m.capacity = s.gpu.memory;
    // The distributed optimizer shards dense states over dp x cp, expert states over expert DP.
    const double experts = transformer_stage_expert_parameters(w, stage);
    const double sharded = w.distributed_optimizer ? (params - experts) / (w.dp * w.cp) + experts / w.expert_dp() : params;
    const double states = (mixed ? 12.0 : 8.0) * sharded;
    m.dense = params * (weight_bytes + grad_bytes) + states;  // weights, gradient buffer, Adam (+ fp32 master)
    // Micro-batches whose activations are held at the peak: the warmup forwards plus one.
    // Interleaved: (pp - stage - 1) x 2 + (vp - 1) x pp + 1 virtual micro-batches of one
    // chunk's layers (schedules.py's warmup count).
    double inflight = double(std::min<std::int64_t>(w.pp - stage, M));
    double layers = double(w.stage_layer_count(stage));
    if (w.vp > 1) {
      const std::int64_t warmup = std::int64_t(w.pp - stage - 1) * 2 + std::int64_t(w.vp - 1) * w.pp;
      inflight = double(std::min<std::int64_t>(warmup + 1, M * w.vp));
      layers = double(w.stage_layer_count(stage)) / w.vp;  // a chunk's layers (the stage's mean)
    }
    // MoE layers keep their MLP's activations in place of the dense ones: the stage's
    // mean layer (its MoE share of layers).
    const auto held = transformer_stage_layers(w, stage);
    const double moe_share = double(std::count_if(held.begin(), held.end(), [&](std::int64_t l) { return w.moe.in_layer(l); })) / double(held.size());
    const double layer_bytes = per_layer + moe_change * moe_share;
    m.activations = w.recompute == Recompute::kFull ? inflight * layers * checkpoint + layer_bytes
                                                    : inflight * layers * layer_bytes;
    if (stage + 1 == w.pp) m.activations += 2.0 * double(w.seq_len / w.cp) * w.micro_batch * double(w.padded_vocab()) / t * 4.0;
    m.reserved = o.framework_reserve + o.fragmentation_share * s.gpu.memory;
    by_stage[static_cast<std::size_t>(stage)] = m;
    out.push_back(m);
  }
  return out;
}

}  // namespace perfcast
