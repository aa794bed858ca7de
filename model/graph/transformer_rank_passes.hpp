#pragma once
/// \file transformer_rank_passes.hpp
/// The passes that build one rank's Megatron-style Transformer iteration (internal to
/// transformer_builder.cpp and its pass files; not part of the graph library's interface).
///
/// A rank's program is a value produced by a pipeline: build_transformer_rank_program()
/// places TransformerRankContext's rank in the tp x dp x pp grid, then runs the 1F1B
/// schedule, which calls the micro-batch pipelines kForwardPasses and kBackwardPasses
/// between pipeline transfers, then kOptimizerPasses once. Each pass appends ops through
/// TransformerDraft, which chains every op to the one before it (Megatron's TP
/// collectives and pipeline transfers block the compute stream; only the host runs ahead).
///
/// To add an op: put it in the pass of its part of the step (or a new pass at its place
/// in one of the pass lists) and append it with TransformerDraft::kernels / ::collective.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "model/graph/execution_graph.hpp"
#include "model/graph/transformer_spec.hpp"

namespace perfcast::transformer {

/// The elementwise kernel that casts a linear layer's input to FP8 (with its transpose for the
/// weight gradient), first in every FP8 linear op (TransformerRankContext::linear): ops that
/// begin with it are FP8 module calls (Op::fp8_module).
inline constexpr const char* kFp8InputCast = "fp8_cast_transpose";

// Elementwise kernels of a Megatron layer: FLOPs and HBM bytes per element, in units of
// the activation element size `e` (plus 1-byte dropout masks). Counted from the kernels'
// operands (read + written once each); assumed, not measured.
inline constexpr double kLayerNormFlops = 8, kLayerNormBwdFlops = 12;
inline constexpr double kGeluFlops = 15, kGeluBwdFlops = 20;  // tanh approximation
inline constexpr double kSoftmaxFlops = 5, kSoftmaxBwdFlops = 4;

/// An elementwise kernel: `elements`, FLOPs and bytes moved per element.
ElementwiseDesc ew(std::string op, double elements, double flops, double bytes);

/// The MLP activation's kernels over `elements` outputs (tokens x MLP width), activation
/// elements of `e` bytes: Megatron's fused bias-GeLU (`bias`: the dense MLP's bias fused in)
/// or GeLU; SwiGLU / GeGLU reading both halves of fc1's output; ReLU; squared ReLU as
/// Megatron-Core's squared_relu runs it, two PyTorch ops (relu, then pow 2). Activations other
/// than GeLU and SwiGLU have no bias fusion: a bias-add kernel runs first when `bias`.
std::vector<KernelDesc> activation_kernels(Activation a, double elements, bool bias, double e);
/// Their backward (autograd's nodes in reverse; the bias gradient is the GEMM's).
std::vector<KernelDesc> activation_backward_kernels(Activation a, double elements, bool bias, double e);

/// Shared state of all ranks: rank groups and collectives, created once each.
struct SharedCollectives {
  ExecutionGraph& g;
  std::map<std::vector<int>, int> groups;
  /// (group, kind, bytes, pair bytes) -> index into ExecutionGraph::collectives.
  std::map<std::tuple<int, int, double, std::vector<double>>, int> collectives;

  std::map<std::pair<int, int>, int> directed;

  /// Index of the group of exactly these ranks, added when new.
  int group(const std::vector<int>& ranks);
  /// A group {from, to} of its own for the point-to-point transfers from `from` to `to`:
  /// each direction keeps its own order (NCCL matches sends and receives between two ranks
  /// in the order they were posted), apart from every other group of the same ranks.
  int directed_group(int from, int to);
  /// Collectives with equal group and descriptor are one collective, issued repeatedly.
  int collective(int grp, const CollectiveDesc& d);
};

/// Where the rank sits in the tp x dp x pp grid, its groups, and the per-rank sizes every
/// pass reads (TP shards of heads and GEMM widths; elements and bytes of one micro-batch).
/// The widths of one tensor-parallel MLP on a TP rank, and the name prefix of its ops.
struct MlpShape {
  std::string prefix;        ///< "mlp." (the dense MLP) or "mlp.shared_experts."
  std::int64_t ffn1 = 0;     ///< fc1 output width per TP rank (2x the width under SwiGLU)
  std::int64_t ffn2 = 0;     ///< fc2 input width per TP rank
  bool bias = true;          ///< biases fused into the activation (the dense MLP); MoE MLPs have none
};

struct TransformerRankContext {
  /// Creates the rank's groups in `shared` (TP, DP, previous and next stage, embedding).
  TransformerRankContext(const TransformerSpec& w, int rank, SharedCollectives& shared);

  const TransformerSpec& w;
  int tp_i = 0, cp_i = 0, dp_i = 0, stage = 0;
  /// dp_group: the stage's ranks with this tp index, over dp and cp (gradients and the loss
  /// are reduced over both, Megatron's data-parallel group with context parallelism).
  int tp_group = -1, dp_group = -1, prev_group = -1, next_group = -1, emb_group = -1;
  /// Context parallelism: the directed groups to the next and from the previous CP rank of
  /// the ring that passes keys and values (-1 without cp).
  int cp_to_next = -1, cp_from_prev = -1;
  /// Mixture of experts (Megatron-Core's expert rank order within a stage: expert TP
  /// fastest, then ep, then expert DP): the groups of the token all-to-all (ep), of the
  /// expert TP all-gather / reduce-scatter, and of the expert gradients (expert DP); -1
  /// where the group has one rank.
  int ep_group = -1, etp_group = -1, edp_group = -1;
  int tpep_group = -1;  ///< expert TP x ep ranks: the all-gather dispatcher's group
  std::int64_t local_experts = 0;  ///< experts on this rank: experts / ep
  /// Rows one local expert processes per micro-batch: this rank's tokens x top_k, gathered
  /// over expert TP, spread evenly over the experts (balanced routing) x the capacity's
  /// load factor.
  std::int64_t expert_rows = 0;
  std::int64_t expert_ffn1 = 0, expert_ffn2 = 0;  ///< expert GEMM widths per expert-TP rank
  std::int64_t shared_ffn1 = 0, shared_ffn2 = 0;  ///< shared-expert GEMM widths per TP rank (0: none)
  double e = 2;  ///< bytes per activation element
  std::int64_t tokens = 0;     ///< micro-batch x sequence / cp (this rank's share)
  std::int64_t tokens_sp = 0;  ///< tokens held by this rank (/tp under sequence parallelism)
  std::int64_t heads = 0, kv_heads = 0;  ///< per TP rank
  std::int64_t qkv = 0, attn_out = 0, ffn1 = 0, ffn2 = 0, vocab = 0;  ///< GEMM widths per TP rank
  /// Multi-latent attention's GEMM widths per TP rank (0 without MLA): the query
  /// up-projection (or full projection) output, the key/value down-projection output (latent
  /// and rotary key; duplicated on every TP rank) and up-projection output (keys and values).
  std::int64_t mla_q_up = 0, mla_kv_down = 0, mla_kv_up = 0;
  [[nodiscard]] MlpShape dense_mlp() const { return {"mlp.", ffn1, ffn2, true}; }
  [[nodiscard]] MlpShape shared_experts() const { return {"mlp.shared_experts.", shared_ffn1, shared_ffn2, false}; }
  double p2p_bytes = 0;  ///< one pipeline transfer: tokens_sp x hidden x e (1/tp of the activation under sequence parallelism)
  double mask = 0;       ///< bytes of a dropout mask element (1 with dropout, else 0)
  /// Bytes per parameter the distributed optimizer all-gathers: 1 with fp8_param_gather, else e.
  [[nodiscard]] double param_gather_bytes() const { return w.fp8_param_gather ? 1.0 : e; }
  /// The model chunk the micro-batch passes run (interleaved schedule, 0 .. vp-1); -1: all
  /// of the stage's layers (the 1F1B schedule, and the optimizer passes).
  int chunk = -1;

  /// Holds the embedding: stage 0 (its first model chunk when interleaved).
  [[nodiscard]] bool first_stage() const { return stage == 0 && chunk <= 0; }
  /// Holds the LM head and loss: the last stage (its last model chunk when interleaved).
  [[nodiscard]] bool last_stage() const { return stage + 1 == w.pp && (chunk < 0 || chunk + 1 == w.vp); }
  /// All layers the rank holds (every model chunk).
  [[nodiscard]] std::int64_t layers_per_stage() const { return w.stage_layer_count(stage); }
  /// Layers the micro-batch passes run: one model chunk's, or the stage's.
  [[nodiscard]] std::int64_t chunk_layers() const { return chunk < 0 ? layers_per_stage() : w.chunk_layer_count(stage, chunk); }
  /// Index of the first of them: chunk v of stage s holds virtual stage v x pp + s
  /// (TransformerSpec::chunk_first_layer).
  [[nodiscard]] std::int64_t first_layer() const { return chunk < 0 ? w.stage_first_layer(stage) : w.chunk_first_layer(stage, chunk); }
  /// Hidden-state elements on this rank.
  [[nodiscard]] double hs() const { return double(tokens_sp) * w.hidden; }
  /// A GEMM in the activation type (attention's batched GEMMs, the LM head).
  [[nodiscard]] GemmDesc gemm(std::int64_t m, std::int64_t n, std::int64_t k, bool bias = false, std::int64_t batch = 1) const {
    return GemmDesc{m, n, k, batch, w.activation_dtype(), bias};
  }
  /// A GEMM of a linear layer: FP8 under `precision: fp8`, else as gemm().
  [[nodiscard]] GemmDesc linear_gemm(std::int64_t m, std::int64_t n, std::int64_t k, bool bias = false) const {
    return GemmDesc{m, n, k, 1, w.precision, bias};
  }
  /// The kernels of a linear layer's GEMMs `gemms`, preceded under FP8 by Transformer
  /// Engine's cast of their bf16 input (`input_elements`: the activation in the forward,
  /// the output gradient in the backward) to FP8 fused with the transpose the other GEMM
  /// of the pair reads (read 2 B, write 1 B twice per element: 4 B).
  [[nodiscard]] std::vector<KernelDesc> linear(double input_elements, std::vector<KernelDesc> gemms) const;
  /// The rank of stage `s` with this rank's tp and dp index.
  [[nodiscard]] int rank_of_stage(int s) const { return tp_i + w.tp * (cp_i + w.cp * (dp_i + w.dp * s)); }
  /// Ranks the gradients are reduced over: dp x cp.
  [[nodiscard]] int grad_ranks() const { return w.dp * w.cp; }
  /// Creates the expert groups (constructor helper).
  void add_expert_groups(int rank, SharedCollectives& shared);
  /// Whether Megatron's fused scale-mask-softmax kernel runs (unfused attention path).
  /// Megatron-DeepSpeed megatron/model/fused_softmax.py (FusedScaleMaskSoftmax.forward):
  /// 16-bit input and 16 < key length <= 2048 and query length % 4 == 0 and
  /// (micro-batch x heads per TP rank) % 4 == 0; otherwise it falls back to separate
  /// PyTorch ops in fp32 (forward_torch_softmax). E.g. 16 heads at tp 8 and micro-batch 1
  /// give 2 attention batches per rank: the fallback.
  [[nodiscard]] bool fused_softmax() const;
};

/// One rank's program under construction: every op appended depends on the one before.
class TransformerDraft {
 public:
  TransformerDraft(const TransformerRankContext& c, SharedCollectives& shared) : c_(c), shared_(shared) {}

  /// Name prefix of the current micro-batch ("mb3.", or "mb3.c1." for model chunk 1 of the
  /// interleaved schedule), or none (optimizer).
  void set_micro_batch(int mb, int chunk = -1);
  void clear_micro_batch() {
    mb_.clear();
    last_mb_ = first_mb_ = false;
  }

  /// Appends `op` after the previous op; ops named "...recompute..." are recomputed forwards.
  void add(Op op);
  /// A compute op of kernels `k`, named micro-batch prefix + `name`.
  void kernels(const std::string& name, Phase ph, std::vector<KernelDesc> k);
  /// A collective op on group `grp`.
  void collective(const std::string& name, Phase ph, int grp, CollectiveDesc d, bool host_waits = false);
  /// A pipeline transfer: a 2-rank all-to-allv with byte matrix `pair`. Blocking for the
  /// host unless the runtime says "stream_ordered" (TransformerSpec::pipeline_host_blocking):
  /// p2p_communication._communicate (Megatron-LM before core 0.x, Megatron-DeepSpeed)
  /// waits on the batch_isend_irecv requests and then calls torch.cuda.synchronize() /
  /// get_accelerator().synchronize() ("to protect against race condition when using
  /// batch_isend_irecv()"), so the host issues nothing more until the transfer, and all
  /// GPU work queued before it, has finished.
  void p2p(const std::string& name, Phase ph, int grp, std::vector<double> pair);
  /// One batched point-to-point call (batch_isend_irecv): `parts` are (directed group,
  /// bytes, label) transfers this rank sends or receives. They run together beside the
  /// stream (Op::concurrent). `joined_by_next`: the next op waits for all of them, and with
  /// a blocking runtime (pipeline_host_blocking) the host does too; otherwise nothing waits
  /// for them until join_next() says so (overlapped p2p communication). Returns the parts'
  /// op indices; no parts: nothing is added.
  struct Transfer {
    int group;
    double bytes;
    std::string label;  ///< e.g. "send_next"
  };
  std::vector<int> p2p_batch(const std::string& name, Phase ph, const std::vector<Transfer>& parts, bool joined_by_next = true);
  /// The next op waits for these ops too.
  void join_next(const std::vector<int>& ops) { join_.insert(join_.end(), ops.begin(), ops.end()); }
  /// The TP collective after a row-parallel layer (forward) or before a column-parallel
  /// layer's input gradient (backward): all-reduce, or reduce-scatter under sequence parallelism.
  /// `beside_gemm`: the collective belongs to a Transformer Engine linear layer, which
  /// tp_comm_overlap runs beside its GEMM (the embedding's and LM head's do not).
  /// Beside the GEMM, the reduce-scatter holds kUbPipelineSms (forward) or kUbBulkSms
  /// (backward) SMs while it runs (Op::sm_sharing_op).
  void tp_reduce(const std::string& name, Phase ph, bool beside_gemm = false);
  /// Sequence parallelism: the all-gather of the hidden states before a column-parallel layer.
  /// Beside the GEMM it holds kUbRingExchangeSms, or kUbBulkSms for `wgrad_input` (the
  /// backward's gather of a column-parallel layer's input for its weight gradient).
  void sp_gather(const std::string& name, Phase ph, bool beside_gemm = false, bool wgrad_input = false);
  /// The op name with the micro-batch prefix.
  [[nodiscard]] std::string named(const std::string& name) const { return mb_ + name; }
  /// Whether the current micro-batch is the iteration's last (set by set_micro_batch).
  [[nodiscard]] bool last_micro_batch() const { return last_mb_; }
  /// Whether the current micro-batch is the iteration's first (of its model chunk).
  [[nodiscard]] bool first_micro_batch() const { return first_mb_; }
  /// overlap_param_gather: the all-gathers issued in the first forward, which wait for the
  /// previous iteration's optimizer step (set by the optimizer pass through prev_deps).
  std::vector<int> param_gathers;
  /// Issues the parameter all-gather of `bytes` on group `grp` beside the chain (after the previous op)
  /// and makes the op after next wait for it ("one bucket ahead"); returns its op index.
  int param_gather_ahead(const std::string& name, Phase ph, int grp, double bytes);
  /// A collective that runs beside the op chain: it starts after the previous op, but the
  /// next op does not wait for it; the op after join_async() waits for all of them.
  void async_collective(const std::string& name, Phase ph, int grp, CollectiveDesc d);
  /// A collective beside the chain that starts after op `dep` (-1: none) and that no later
  /// op waits for unless told (join_next / join_after_next); returns its op index.
  int side_collective(const std::string& name, Phase ph, int grp, CollectiveDesc d, int dep);
  /// The next op waits for every async_collective issued so far.
  void join_async() { join_.insert(join_.end(), pending_.begin(), pending_.end()), pending_.clear(); }

  RankProgram program;

 private:
  const TransformerRankContext& c_;
  SharedCollectives& shared_;
  int last_ = -1;
  int before_last_ = -1;  ///< the op before last_ in the chain
  std::vector<int> join_after_next_;  ///< side collectives the op after the next one waits for
  int share_next_op_ = -1, share_next_sms_ = 0;  ///< a gather beside the next op: Op::sm_sharing_op
  std::string mb_;  ///< name prefix of the current micro-batch, e.g. "mb3."
  bool last_mb_ = false;
  bool first_mb_ = false;
  std::vector<int> pending_, join_;  ///< async collectives not yet joined; those the next op waits for
};

using TransformerPass = void (*)(const TransformerRankContext&, TransformerDraft&);
struct NamedTransformerPass {
  std::string_view name;
  TransformerPass run;
};

// ---- one micro-batch's forward (transformer_stage_passes.cpp, transformer_layer_passes.cpp) ----
void add_get_batch(const TransformerRankContext& c, TransformerDraft& d);
void add_embedding_forward(const TransformerRankContext& c, TransformerDraft& d);
void add_layers_forward(const TransformerRankContext& c, TransformerDraft& d);
void add_head_and_loss(const TransformerRankContext& c, TransformerDraft& d);
// ---- one micro-batch's backward ----
void add_head_backward(const TransformerRankContext& c, TransformerDraft& d);
void add_layers_backward(const TransformerRankContext& c, TransformerDraft& d);
void add_embedding_backward(const TransformerRankContext& c, TransformerDraft& d);
// ---- once per iteration ----
void add_gradient_sync(const TransformerRankContext& c, TransformerDraft& d);
void add_optimizer_step(const TransformerRankContext& c, TransformerDraft& d);

/// One layer: `tag` "" or "recompute." (full activation recomputation in the backward).
void add_layer_forward(const TransformerRankContext& c, TransformerDraft& d, int layer, Phase ph, const std::string& tag);
void add_layer_backward(const TransformerRankContext& c, TransformerDraft& d, int layer);
/// A mixture-of-experts MLP (transformer_moe_passes.cpp), after the post-attention norm:
/// router, token permutation and all-to-all dispatch, the local experts' GEMMs, combine.
/// `p`: the layer's name prefix.
/// A tensor-parallel MLP over every token: all-gather (sequence parallelism), fc1 and its
/// activation, fc2, the TP reduction; ops named p + prefix + "fc1" etc. Backward: fc2's
/// input gathered again, fc2, activation and fc1 (input and weight gradients), the reduction.
void add_mlp_forward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph, const MlpShape& m);
void add_mlp_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, const MlpShape& m);
void add_moe_forward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph);
void add_moe_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p);
/// Self-attention's core (scores, softmax, values) of a layer, prefix `p`: flash (with the
/// CP ring under context parallelism), or the unfused kernels; causal for decoders.
void add_attention_core_forward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p, Phase ph);
void add_attention_core_backward(const TransformerRankContext& c, TransformerDraft& d, const std::string& p);

// ---- diffusion transformers (transformer_dit_passes.cpp; TransformerSpec::diffusion()) ----
/// One DiT layer: adaLN modulation, self-attention, cross-attention to the text, MLP.
void add_dit_layer_forward(const TransformerRankContext& c, TransformerDraft& d, int layer, Phase ph, const std::string& tag);
void add_dit_layer_backward(const TransformerRankContext& c, TransformerDraft& d, int layer);
/// In place of get_batch, the embedding, the LM head and loss, and their backwards.
void add_dit_get_batch(const TransformerRankContext& c, TransformerDraft& d);
void add_dit_input_forward(const TransformerRankContext& c, TransformerDraft& d);
void add_dit_output_and_loss(const TransformerRankContext& c, TransformerDraft& d);
void add_dit_output_backward(const TransformerRankContext& c, TransformerDraft& d);
void add_dit_input_backward(const TransformerRankContext& c, TransformerDraft& d);

inline constexpr std::array<NamedTransformerPass, 4> kForwardPasses{{
    {"get_batch", add_get_batch},
    {"embedding", add_embedding_forward},
    {"layers", add_layers_forward},
    {"head_and_loss", add_head_and_loss},
}};
inline constexpr std::array<NamedTransformerPass, 3> kBackwardPasses{{
    {"head_backward", add_head_backward},
    {"layers_backward", add_layers_backward},
    {"embedding_backward", add_embedding_backward},
}};
inline constexpr std::array<NamedTransformerPass, 2> kOptimizerPasses{{
    {"gradient_sync", add_gradient_sync},
    {"optimizer_step", add_optimizer_step},
}};

/// Rank `rank`'s program: the 1F1B schedule of micro-batch forwards and backwards with
/// their pipeline transfers, then the optimizer passes.
[[nodiscard]] RankProgram build_transformer_rank_program(const TransformerSpec& w, int rank, SharedCollectives& shared);
/// The same with the interleaved 1F1B schedule (w.vp model chunks per rank;
/// transformer_interleaved_schedule.cpp).
[[nodiscard]] RankProgram build_interleaved_rank_program(const TransformerSpec& w, int rank, SharedCollectives& shared);

}  // namespace perfcast::transformer
