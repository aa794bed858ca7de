#include "model/graph/transformer_builder.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace perfcast {
namespace {

// Elementwise kernels of a Megatron layer: FLOPs and HBM bytes per element, in units of
// the activation element size `e` (plus 1-byte dropout masks). Counted from the kernels'
// operands (read + written once each); assumed, not measured.
constexpr double kLayerNormFlops = 8, kLayerNormBwdFlops = 12;
constexpr double kGeluFlops = 15, kGeluBwdFlops = 20;  // tanh approximation
constexpr double kSoftmaxFlops = 5, kSoftmaxBwdFlops = 4;

ElementwiseDesc ew(std::string op, double elements, double flops, double bytes) {
  return ElementwiseDesc{std::move(op), static_cast<std::int64_t>(elements), flops, bytes};
}

/// Shared state of all ranks: rank groups and collectives, created once each.
struct Shared {
  ExecutionGraph& g;
  std::map<std::vector<int>, int> groups;
  std::map<std::string, int> collectives;

  int group(const std::vector<int>& ranks) {
    auto [it, fresh] = groups.try_emplace(ranks, static_cast<int>(g.groups.size()));
    if (fresh) g.groups.push_back(RankGroup{ranks});
    return it->second;
  }
  /// Collectives with equal group and descriptor are one collective, issued repeatedly.
  int collective(int grp, const CollectiveDesc& d) {
    std::string key = fmt::format("{}|{}|{}", grp, static_cast<int>(d.kind), d.bytes);
    for (double b : d.pair_bytes) key += fmt::format("|{}", b);
    auto [it, fresh] = collectives.try_emplace(key, static_cast<int>(g.collectives.size()));
    if (fresh) g.collectives.push_back(GraphCollective{d, grp});
    return it->second;
  }
};

class RankBuilder {
 public:
  RankBuilder(const TransformerSpec& w, int rank, Shared& sh) : w_(w), sh_(sh) {
    const int t = w.tp, dp = w.dp;
    tp_i_ = rank % t;
    dp_i_ = (rank / t) % dp;
    stage_ = rank / (t * dp);
    auto at = [&](int ti, int di, int si) { return ti + t * (di + dp * si); };
    std::vector<int> tpg, dpg;
    for (int i = 0; i < t; ++i) tpg.push_back(at(i, dp_i_, stage_));
    for (int i = 0; i < dp; ++i) dpg.push_back(at(tp_i_, i, stage_));
    tp_group_ = sh.group(tpg);
    dp_group_ = sh.group(dpg);
    if (stage_ > 0) prev_group_ = sh.group({at(tp_i_, dp_i_, stage_ - 1), rank});
    if (stage_ + 1 < w.pp) next_group_ = sh.group({rank, at(tp_i_, dp_i_, stage_ + 1)});
    if (w.pp > 1) emb_group_ = sh.group({at(tp_i_, dp_i_, 0), at(tp_i_, dp_i_, w.pp - 1)});

    e_ = dtype_bytes(w.precision);
    tokens_ = w.micro_batch * w.seq_len;
    tokens_sp_ = w.sequence_parallel ? tokens_ / t : tokens_;
    heads_ = w.heads / t;
    kv_heads_ = w.kv_heads / t;
    qkv_ = (w.heads + 2 * w.kv_heads) * w.head_dim() / t;
    attn_out_ = w.heads * w.head_dim() / t;
    ffn1_ = (w.activation == Activation::kSwiglu ? 2 : 1) * w.ffn_hidden / t;
    ffn2_ = w.ffn_hidden / t;
    vocab_ = w.padded_vocab() / t;
    p2p_bytes_ = double(tokens_) * w.hidden * e_;
    mask_ = w.dropout > 0 ? 1.0 : 0.0;
  }

  RankProgram build() {
    const int P = w_.pp, s = stage_;
    const auto M = static_cast<int>(w_.micro_batches());
    const int warmup = std::min(P - s - 1, M);
    const int steady = M - warmup;
    for (int i = 0; i < warmup; ++i) {
      if (s > 0) p2p("recv_forward", Phase::kForward, prev_group_, {{0, p2p_bytes_, 0, 0}});
      forward(i);
      if (s + 1 < P) p2p("send_forward", Phase::kForward, next_group_, {{0, p2p_bytes_, 0, 0}});
    }
    if (steady > 0 && s > 0) p2p("recv_forward", Phase::kForward, prev_group_, {{0, p2p_bytes_, 0, 0}});
    for (int i = 0; i < steady; ++i) {
      forward(warmup + i);
      if (s + 1 < P) p2p("send_forward_recv_backward", Phase::kForward, next_group_, {{0, p2p_bytes_, p2p_bytes_, 0}});
      backward(i);
      if (s > 0) {
        if (i == steady - 1) {
          p2p("send_backward", Phase::kBackward, prev_group_, {{0, 0, p2p_bytes_, 0}});
        } else {
          p2p("send_backward_recv_forward", Phase::kBackward, prev_group_, {{0, p2p_bytes_, p2p_bytes_, 0}});
        }
      }
    }
    for (int i = 0; i < warmup; ++i) {
      if (s + 1 < P) p2p("recv_backward", Phase::kBackward, next_group_, {{0, 0, p2p_bytes_, 0}});
      backward(steady + i);
      if (s > 0) p2p("send_backward", Phase::kBackward, prev_group_, {{0, 0, p2p_bytes_, 0}});
    }
    optimizer();
    return std::move(prog_);
  }

 private:
  const TransformerSpec& w_;
  Shared& sh_;
  int tp_i_ = 0, dp_i_ = 0, stage_ = 0;
  int tp_group_ = -1, dp_group_ = -1, prev_group_ = -1, next_group_ = -1, emb_group_ = -1;
  double e_ = 2;
  std::int64_t tokens_ = 0, tokens_sp_ = 0, heads_ = 0, kv_heads_ = 0, qkv_ = 0, attn_out_ = 0, ffn1_ = 0, ffn2_ = 0,
               vocab_ = 0;
  double p2p_bytes_ = 0, mask_ = 0;
  RankProgram prog_;
  int last_ = -1;
  std::string mb_;  ///< name prefix of the current micro-batch, e.g. "mb3."

  void add(Op op) {
    if (last_ >= 0) op.deps.push_back(last_);
    op.recompute = op.name.find("recompute.") != std::string::npos;  // layer_forward(.., "recompute.")
    prog_.ops.push_back(std::move(op));
    last_ = static_cast<int>(prog_.ops.size()) - 1;
  }
  void kern(const std::string& name, Phase ph, std::vector<KernelDesc> k) {
    add(Op{mb_ + name, ph, Stream::kCompute, std::move(k), {}, {}, false});
  }
  void coll(const std::string& name, Phase ph, int grp, CollectiveDesc d, bool host_waits = false) {
    add(Op{mb_ + name, ph, Stream::kComm, {}, sh_.collective(grp, d), {}, host_waits});
  }
  /// A pipeline transfer. Blocking for the host: p2p_communication._communicate (Megatron-LM
  /// before core 0.x, Megatron-DeepSpeed) waits on the batch_isend_irecv requests and then
  /// calls torch.cuda.synchronize() / get_accelerator().synchronize() ("to protect against
  /// race condition when using batch_isend_irecv()"), so the host issues nothing more until
  /// the transfer, and all GPU work queued before it, has finished.
  void p2p(const std::string& name, Phase ph, int grp, std::vector<double> pair) {
    CollectiveDesc d{CollectiveKind::kAllToAllV, 0, std::move(pair)};
    coll(name, ph, grp, std::move(d), true);
  }
  GemmDesc gemm(std::int64_t m, std::int64_t n, std::int64_t k, bool bias = false, std::int64_t batch = 1) const {
    return GemmDesc{m, n, k, batch, w_.precision, bias};
  }
  /// The TP collective after a row-parallel layer (forward) or before a column-parallel
  /// layer's input gradient (backward): all-reduce, or reduce-scatter under sequence parallelism.
  void tp_reduce(const std::string& name, Phase ph) {
    if (w_.tp == 1) return;
    const double bytes = double(tokens_) * w_.hidden * e_;
    coll(name, ph, tp_group_, {w_.sequence_parallel ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, bytes, {}});
  }
  void sp_gather(const std::string& name, Phase ph) {
    if (w_.tp == 1 || !w_.sequence_parallel) return;
    coll(name, ph, tp_group_, {CollectiveKind::kAllGather, double(tokens_) * w_.hidden * e_, {}});
  }
  double hs() const { return double(tokens_sp_) * w_.hidden; }  ///< hidden-state elements on this rank

  // ---- one layer -----------------------------------------------------------------------
  void attention_core_forward(const std::string& p, Phase ph) {
    const std::int64_t b = w_.micro_batch, s = w_.seq_len, d = w_.head_dim();
    const bool causal = w_.kind == TransformerKind::kDecoder;
    if (w_.attention == AttentionImpl::kFlash) {
      kern(p + "flash_attention", ph,
           {AttentionDesc{b, heads_, kv_heads_, s, s, d, causal, w_.precision, AttentionPass::kForward}});
      return;
    }
    const double scores = double(b) * heads_ * s * s;
    std::vector<KernelDesc> k{gemm(s, s, d, false, b * heads_)};
    if (fused_softmax()) {
      k.push_back(ew("scale_mask_softmax", scores, kSoftmaxFlops, 2 * e_));
    } else {
      // FusedScaleMaskSoftmax.forward_torch_softmax: input.float(), input * scale,
      // masked_fill_(mask, -10000), torch.nn.Softmax, probs.half(): one framework op each.
      const double f = 4;  // fp32 scores, bytes per element
      const bool cast = e_ < f;
      if (cast) k.push_back(ew("softmax_input_to_fp32", scores, 0, e_ + f));
      kern(p + "core_attention", ph, std::move(k));
      kern(p + "core_attention.softmax_scale", ph, {ew("softmax_scale", scores, 1, 2 * f)});
      kern(p + "core_attention.softmax_mask_fill", ph, {ew("softmax_mask_fill", scores, 1, 2 * f + 1)});
      kern(p + "core_attention.softmax", ph, {ew("softmax", scores, kSoftmaxFlops, 2 * f)});
      k.clear();
      if (cast) k.push_back(ew("softmax_probs_to_half", scores, 0, f + e_));
    }
    if (w_.dropout > 0) k.push_back(ew("attention_dropout", scores, 2, 2 * e_ + 1));
    k.push_back(gemm(s, d, s, false, b * heads_));
    kern(p + (fused_softmax() ? "core_attention" : "core_attention.context"), ph, std::move(k));
  }

  /// Whether Megatron's fused scale-mask-softmax kernel runs (unfused attention path).
  /// Megatron-DeepSpeed megatron/model/fused_softmax.py (FusedScaleMaskSoftmax.forward):
  /// 16-bit input and 16 < key length <= 2048 and query length % 4 == 0 and
  /// (micro-batch x heads per TP rank) % 4 == 0; otherwise it falls back to separate
  /// PyTorch ops in fp32 (forward_torch_softmax). E.g. 16 heads at tp 8 and micro-batch 1
  /// give 2 attention batches per rank: the fallback.
  bool fused_softmax() const {
    const std::int64_t s = w_.seq_len, batches = w_.micro_batch * heads_;
    return e_ <= 2 && s > 16 && s <= 2048 && s % 4 == 0 && batches % 4 == 0;
  }

  void layer_forward(int l, Phase ph, const std::string& tag) {
    const std::string p = fmt::format("layer{}.{}", l, tag);
    const double h = double(w_.hidden);
    kern(p + "input_layernorm", ph, {ew("layernorm", hs(), kLayerNormFlops, 2 * e_)});
    sp_gather(p + "attention.all_gather", ph);
    kern(p + "qkv", ph, {gemm(tokens_, qkv_, w_.hidden, true)});
    attention_core_forward(p, ph);
    kern(p + "attention.dense", ph, {gemm(tokens_, w_.hidden, attn_out_)});
    tp_reduce(p + "attention.tp_reduce", ph);
    kern(p + "attention.bias_dropout_add", ph, {ew("bias_dropout_add", hs(), 3, 3 * e_ + mask_)});
    kern(p + "post_attention_layernorm", ph, {ew("layernorm", hs(), kLayerNormFlops, 2 * e_)});
    sp_gather(p + "mlp.all_gather", ph);
    const double inner = double(tokens_) * ffn2_;
    kern(p + "mlp.fc1", ph,
         {gemm(tokens_, ffn1_, w_.hidden),
          w_.activation == Activation::kGelu ? ew("bias_gelu", inner, kGeluFlops, 2 * e_) : ew("swiglu", inner, 6, 3 * e_)});
    kern(p + "mlp.fc2", ph, {gemm(tokens_, w_.hidden, ffn2_)});
    tp_reduce(p + "mlp.tp_reduce", ph);
    kern(p + "mlp.bias_dropout_add", ph, {ew("bias_dropout_add", hs(), 3, 3 * e_ + mask_)});
    (void)h;
  }

  void layer_backward(int l) {
    const Phase ph = Phase::kBackward;
    if (w_.recompute == Recompute::kFull) layer_forward(l, ph, "recompute.");
    const std::string p = fmt::format("layer{}.backward.", l);
    const std::int64_t b = w_.micro_batch, s = w_.seq_len, d = w_.head_dim(), T = tokens_, H = w_.hidden;
    const double inner = double(T) * ffn2_;
    kern(p + "mlp.bias_dropout_add", ph, {ew("dropout_add_backward", hs(), 2, 5 * e_ + mask_)});
    sp_gather(p + "mlp.fc2.all_gather", ph);
    kern(p + "mlp.fc2", ph, {gemm(T, ffn2_, H), gemm(ffn2_, H, T)});
    kern(p + "mlp.fc1", ph,
         {w_.activation == Activation::kGelu ? ew("bias_gelu_backward", inner, kGeluBwdFlops, 3 * e_)
                                             : ew("swiglu_backward", inner, 8, 5 * e_),
          gemm(T, H, ffn1_), gemm(ffn1_, H, T)});
    tp_reduce(p + "mlp.tp_reduce", ph);
    kern(p + "post_attention_layernorm", ph, {ew("layernorm_backward", hs(), kLayerNormBwdFlops, 4 * e_)});
    kern(p + "attention.bias_dropout_add", ph, {ew("dropout_add_backward", hs(), 2, 5 * e_ + mask_)});
    sp_gather(p + "attention.dense.all_gather", ph);
    kern(p + "attention.dense", ph, {gemm(T, attn_out_, H), gemm(attn_out_, H, T)});
    const bool causal = w_.kind == TransformerKind::kDecoder;
    if (w_.attention == AttentionImpl::kFlash) {
      kern(p + "flash_attention", ph, {AttentionDesc{b, heads_, kv_heads_, s, s, d, causal, w_.precision, AttentionPass::kBackward}});
    } else {
      if (w_.recompute == Recompute::kSelective) attention_core_forward(p + "recompute.", ph);
      const double scores = double(b) * heads_ * s * s;
      std::vector<KernelDesc> k{gemm(s, s, d, false, b * heads_), gemm(s, d, s, false, b * heads_)};
      if (w_.dropout > 0) k.push_back(ew("attention_dropout_backward", scores, 1, 2 * e_ + 1));
      if (fused_softmax()) {
        k.push_back(ew("softmax_backward", scores, kSoftmaxBwdFlops, 3 * e_));
      } else {
        // Autograd nodes of the fallback, in reverse: half() (ToCopyBackward), softmax,
        // masked_fill_, mul by scale, float() (ToCopyBackward); fp32 gradients.
        const double f = 4;
        const bool cast = e_ < f;
        if (cast) k.push_back(ew("softmax_grad_to_fp32", scores, 0, e_ + f));
        kern(p + "core_attention.context", ph, std::move(k));
        kern(p + "core_attention.softmax", ph, {ew("softmax_backward", scores, kSoftmaxBwdFlops, 3 * f)});
        kern(p + "core_attention.softmax_mask_fill", ph, {ew("softmax_mask_fill_backward", scores, 1, 2 * f + 1)});
        kern(p + "core_attention.softmax_scale", ph, {ew("softmax_scale_backward", scores, 1, 2 * f)});
        k.clear();
        if (cast) k.push_back(ew("softmax_grad_to_half", scores, 0, f + e_));
      }
      k.push_back(gemm(s, d, s, false, b * heads_));
      k.push_back(gemm(s, d, s, false, b * heads_));
      kern(p + "core_attention", ph, std::move(k));
    }
    sp_gather(p + "qkv.all_gather", ph);
    kern(p + "qkv", ph, {gemm(T, H, qkv_), gemm(qkv_, H, T)});
    tp_reduce(p + "qkv.tp_reduce", ph);
    kern(p + "input_layernorm", ph, {ew("layernorm_backward", hs(), kLayerNormBwdFlops, 4 * e_)});
  }

  // ---- one micro-batch on this stage ---------------------------------------------------
  std::int64_t layers_per_stage() const { return w_.layers / w_.pp; }

  /// Megatron(-DeepSpeed) pretrain_gpt.forward_step calls get_batch on every pipeline stage
  /// for every micro-batch. get_batch -> tensor_parallel.broadcast_data: the key sizes go to
  /// the GPU, are broadcast over the TP group and come back with sizes_cuda.cpu() (a host
  /// sync), then the int64 tokens (b x (s+1)) are copied to the GPU and broadcast; then
  /// get_ltor_masks_and_position_ids builds the causal mask (tril of s x s ones, compared
  /// < 0.5), the loss mask and the position ids, and tokens/labels are sliced contiguous.
  void get_batch(Phase ph) {
    const double sizes_bytes = 8.0 * 8;  // MAX_DATA_DIM = 8 int64 per key, one key ("text")
    const double token_bytes = 8.0 * w_.micro_batch * (w_.seq_len + 1);
    kern("get_batch.sizes_to_gpu", ph, {MemcpyDesc{sizes_bytes, CopyKind::kHostToDevice}});
    if (w_.tp > 1) coll("get_batch.broadcast_sizes", ph, tp_group_, {CollectiveKind::kBroadcast, sizes_bytes, {}});
    add(Op{mb_ + "get_batch.sizes_to_cpu", ph, Stream::kCompute, {MemcpyDesc{sizes_bytes, CopyKind::kDeviceToHost}}, {}, {}, true});
    kern("get_batch.tokens_to_gpu", ph, {MemcpyDesc{token_bytes, CopyKind::kHostToDevice}});
    if (w_.tp > 1) coll("get_batch.broadcast_tokens", ph, tp_group_, {CollectiveKind::kBroadcast, token_bytes, {}});
    const double s = double(w_.seq_len), tokens = double(tokens_);
    kern("get_batch.masks", ph,
         {ew("tokens_labels_contiguous", 2 * tokens, 0, 16), ew("causal_mask_tril", s * s, 1, 4 + 1),
          ew("loss_mask", tokens, 2, 8 + 4), ew("position_ids", tokens, 1, 8)});
  }

  void forward(int mb) {
    mb_ = fmt::format("mb{}.", mb);
    const Phase ph = Phase::kForward;
    get_batch(ph);
    if (stage_ == 0) {
      const double pos = w_.position == PositionEmbedding::kLearned ? e_ : 0.0;
      kern("embedding", ph, {ew("embedding_lookup", double(tokens_) * w_.hidden, 1, 2 * e_ + pos)});
      tp_reduce("embedding.tp_reduce", ph);
      if (w_.dropout > 0) kern("embedding.dropout", ph, {ew("dropout", hs(), 2, 2 * e_ + 1)});
    }
    const std::int64_t first = stage_ * layers_per_stage();
    for (std::int64_t l = 0; l < layers_per_stage(); ++l) layer_forward(static_cast<int>(first + l), ph, "");
    if (stage_ + 1 == w_.pp) {
      kern("final_layernorm", ph, {ew("layernorm", hs(), kLayerNormFlops, 2 * e_)});
      sp_gather("lm_head.all_gather", ph);
      kern("lm_head", ph, {gemm(tokens_, vocab_, w_.hidden)});
      // Megatron's vocab-parallel cross entropy on the logits cast to fp32: cast, max,
      // subtract, exp, sum, divide (about 9 fp32 passes); three TP all-reduces of per-token values.
      kern("cross_entropy", ph, {ew("vocab_parallel_cross_entropy", double(tokens_) * vocab_, 6, e_ + 36)});
      if (w_.tp > 1) {
        for (const char* n : {"max", "target", "sum_exp"}) {
          coll(fmt::format("cross_entropy.all_reduce_{}", n), ph, tp_group_, {CollectiveKind::kAllReduce, double(tokens_) * 4, {}});
        }
      }
      // pretrain_gpt.loss_func: sum(losses * loss_mask) / loss_mask.sum(), then
      // average_losses_across_data_parallel_group: an all-reduce of one fp32 over the DP group.
      kern("loss", ph, {ew("masked_loss_sum", double(tokens_), 2, 8)});
      if (w_.dp > 1) coll("loss.dp_all_reduce", ph, dp_group_, {CollectiveKind::kAllReduce, 4, {}});
    }
  }

  void backward(int mb) {
    mb_ = fmt::format("mb{}.", mb);
    const Phase ph = Phase::kBackward;
    const std::int64_t T = tokens_, H = w_.hidden;
    if (stage_ + 1 == w_.pp) {
      kern("cross_entropy.backward", ph, {ew("cross_entropy_backward", double(T) * vocab_, 2, 12 + e_)});
      kern("lm_head.backward", ph, {gemm(T, H, vocab_), gemm(vocab_, H, T)});
      tp_reduce("lm_head.tp_reduce", ph);
      kern("final_layernorm.backward", ph, {ew("layernorm_backward", hs(), kLayerNormBwdFlops, 4 * e_)});
    }
    const std::int64_t first = stage_ * layers_per_stage();
    for (std::int64_t l = layers_per_stage(); l-- > 0;) layer_backward(static_cast<int>(first + l));
    if (stage_ == 0) {
      if (w_.dropout > 0) kern("embedding.dropout.backward", ph, {ew("dropout_backward", hs(), 1, 2 * e_ + 1)});
      sp_gather("embedding.all_gather", ph);
      // Dense gradient of the vocab shard: zero, scatter-add the tokens' rows, accumulate
      // into the fp32 main gradient.
      const double table = double(vocab_) * H;
      kern("embedding.backward", ph,
           {ew("zero", table, 0, e_), ew("embedding_scatter_add", double(T) * H, 1, 3 * e_),
            ew("main_grad_accumulate", table, 1, e_ + 8)});
    }
  }

  void optimizer() {
    mb_.clear();
    const Phase ph = Phase::kOptimizer;
    const double params = transformer_rank_parameters(w_, stage_);
    const double gb = dtype_bytes(w_.grad_reduce_dtype);
    if (w_.dp > 1) {
      const CollectiveKind k = w_.distributed_optimizer ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
      coll(w_.distributed_optimizer ? "grads.reduce_scatter" : "grads.all_reduce", ph, dp_group_, {k, params * gb, {}});
    }
    if (emb_group_ >= 0 && w_.tied_embeddings && (stage_ == 0 || stage_ + 1 == w_.pp)) {
      coll("embedding_grads.all_reduce", ph, emb_group_, {CollectiveKind::kAllReduce, double(vocab_) * w_.hidden * gb, {}});
    }
    const double local = w_.distributed_optimizer ? params / w_.dp : params;
    const bool mixed = dtype_bytes(w_.precision) < 4;
    // Grad norm (read fp32 grads), fused Adam (read grad, read+write param, m, v in fp32:
    // 28 B), copy of the fp32 main params to the model's low-precision params (mixed only).
    std::vector<KernelDesc> k{ew("grad_norm", local, 2, 4), ew("adam", local, 12, 28)};
    if (mixed) k.push_back(ew("copy_main_params", local, 0, 4 + e_));
    kern("optimizer.adam", ph, std::move(k));
    if (w_.dp > 1 && w_.distributed_optimizer) {
      coll("params.all_gather", ph, dp_group_, {CollectiveKind::kAllGather, params * e_, {}});
    }
    kern("zero_grad", ph, {ew("zero", params, 0, 4)});
  }
};

}  // namespace

double transformer_rank_parameters(const TransformerSpec& w, int stage) {
  const double t = w.tp, h = double(w.hidden), d = double(w.head_dim());
  const double qkv = (h + 1) * (w.heads + 2.0 * w.kv_heads) * d / t;
  const double proj = h * w.heads * d / t + h;
  const double f1 = (w.activation == Activation::kSwiglu ? 2.0 : 1.0) * double(w.ffn_hidden);
  const double mlp = (h + 1) * f1 / t + double(w.ffn_hidden) * h / t + h;
  double p = (qkv + proj + mlp + 4 * h) * double(w.layers / w.pp);
  const double table = double(w.padded_vocab()) / t * h;
  if (stage == 0) p += table + (w.position == PositionEmbedding::kLearned ? double(w.seq_len) * h : 0.0);
  if (stage + 1 == w.pp) {
    p += 2 * h;
    if (!w.tied_embeddings || w.pp > 1) p += table;
  }
  return p;
}

ExecutionGraph build_transformer_graph(const TransformerSpec& w, int world) {
  if (w.tp * w.pp * w.dp != world) {
    throw ConfigError(w.file, "/parallelism", fmt::format("tp x pp x dp = {} but the system has {} GPUs", w.tp * w.pp * w.dp, world));
  }
  ExecutionGraph g;
  Shared sh{g, {}, {}};
  g.ranks.reserve(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) g.ranks.push_back(RankBuilder(w, r, sh).build());
  return g;
}

std::vector<RankMemory> estimate_transformer_memory(const TransformerSpec& w, const SystemSpec& s, const MemoryOptions& o) {
  std::vector<RankMemory> out;
  const int world = s.world_size();
  const double e = dtype_bytes(w.precision);
  const bool mixed = e < 4;
  const double sbh = double(w.seq_len) * w.micro_batch * w.hidden;
  const double t = w.tp;
  const double attn = 5.0 * w.heads * w.seq_len / w.hidden;  // the a*s/h score terms
  const bool keep_scores = w.attention == AttentionImpl::kUnfused && w.recompute == Recompute::kNone;
  const double sp = w.sequence_parallel ? t : 1.0;
  // Bytes per layer per micro-batch at 2-byte activations (Korthikanti et al. table 2).
  double per_layer = w.sequence_parallel ? sbh * 34 / t : sbh * (10 + 24 / t);
  if (keep_scores) per_layer += sbh * attn / t;
  per_layer *= e / 2;
  const double checkpoint = 2 * sbh / sp * (e / 2);  // the layer input kept under full recompute
  const auto M = w.micro_batches();
  for (int r = 0; r < world; ++r) {
    const int stage = r / (w.tp * w.dp);
    const double params = transformer_rank_parameters(w, stage);
    RankMemory m;
    m.rank = r;
    m.capacity = s.gpu.memory;
    const double states = (mixed ? 12.0 : 8.0) * params / (w.distributed_optimizer ? w.dp : 1);
    m.dense = params * e + params * 4.0 + states;  // weights, fp32 main grads, Adam (+ fp32 master)
    const double inflight = double(std::min<std::int64_t>(w.pp - stage, M));
    const double layers = double(w.layers / w.pp);
    m.activations = w.recompute == Recompute::kFull ? inflight * layers * checkpoint + per_layer
                                                    : inflight * layers * per_layer;
    if (stage + 1 == w.pp) m.activations += 2.0 * double(w.seq_len) * w.micro_batch * double(w.padded_vocab()) / t * 4.0;
    m.reserved = o.reserved_share * s.gpu.memory;
    out.push_back(m);
  }
  return out;
}

}  // namespace perfcast
