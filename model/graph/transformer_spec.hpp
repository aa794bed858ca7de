#pragma once
/// \file transformer_spec.hpp
/// Transformer training workloads (schema "perfcast.workload" 1.x, model "transformer"):
/// a Megatron-style encoder (BERT), decoder (GPT, Llama) or video diffusion transformer
/// (DiT: Cosmos, NeMo's DiT) stack trained with tensor (TP), pipeline (PP, 1F1B), context
/// (CP) and data parallelism (DP), as Megatron-LM's arguments describe it.
///
/// Sizes are counts (tokens, elements), not bytes. `vocab` is the tokenizer's size; the
/// builder pads it to a multiple of 128 x tp as Megatron does (--make-vocab-size-divisible-by 128).

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/dtype.hpp"
#include "core/json_reader.hpp"
#include "predictors/kernel_desc.hpp"

namespace perfcast {

/// Encoder: bidirectional attention with a vocabulary (BERT); decoder: causal (GPT, Llama);
/// diffusion: a video diffusion transformer (DitSpec), bidirectional, without a vocabulary.
enum class TransformerKind { kEncoder, kDecoder, kDiffusion };
/// MLP activations: GeLU (GPT, BERT), SwiGLU (Llama: a gated SiLU, fc1 twice as wide),
/// GeGLU (a gated GeLU), ReLU, squared ReLU (Nemotron-4: relu(x)^2, So et al. 2021 "Primer").
enum class Activation { kGelu, kSwiglu, kGeglu, kRelu, kSquaredRelu };
/// The workload's name of `a` ("gelu", "swiglu", "geglu", "relu", "squared_relu").
[[nodiscard]] const char* activation_name(Activation a);
/// Gated activations (SwiGLU, GeGLU) multiply two halves of fc1's output: fc1 is 2 x ffn wide.
[[nodiscard]] inline bool gated(Activation a) { return a == Activation::kSwiglu || a == Activation::kGeglu; }
/// fc1's output width per MLP width: 2 for gated activations, else 1.
[[nodiscard]] inline double fc1_multiplier(Activation a) { return gated(a) ? 2.0 : 1.0; }
enum class Recompute { kNone, kSelective, kFull };
enum class AttentionImpl { kFlash, kUnfused };
enum class PositionEmbedding { kLearned, kRope };

/// Multi-latent attention (DeepSeek-V2, arXiv:2405.04434 section 2.1; Megatron-Core's
/// MLASelfAttention, --multi-latent-attention): keys and values come from a compressed
/// latent of kv_lora_rank elements per token (plus one rotary key of qk_rope_head_dim shared
/// by the heads), queries from one of q_lora_rank (or a full projection when 0). Per head,
/// queries and keys have qk_head_dim + qk_rope_head_dim elements, values v_head_dim.
/// Absent (kv_lora_rank 0): standard multi-head / grouped-query attention.
struct MlaSpec {
  std::int64_t q_lora_rank = 0;       ///< 0: queries from a full projection (DeepSeek-V2-Lite)
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_head_dim = 0;       ///< the part of a query / key head without rotary embedding
  std::int64_t qk_rope_head_dim = 0;  ///< the rotary part
  std::int64_t v_head_dim = 0;
  [[nodiscard]] bool enabled() const { return kv_lora_rank > 0; }
};

/// Mixture-of-experts MLPs (Megatron-Core's MoELayer with the all-to-all token dispatcher):
/// every layer's MLP is `experts` expert MLPs of width `ffn_hidden`, each token routed to
/// `top_k` of them. Absent (experts 0): dense MLPs.
struct MoeSpec {
  int experts = 0;              ///< --num-experts
  int top_k = 2;                ///< --moe-router-topk
  std::int64_t ffn_hidden = 0;  ///< --moe-ffn-hidden-size (default: the model's ffn_hidden)
  /// --moe-expert-capacity-factor; 0: dropless. Routing is assumed balanced (every expert
  /// gets top_k x tokens / experts), so a factor only changes the work when the experts'
  /// inputs are padded to capacity (pad_to_capacity) or it is below 1 (tokens dropped).
  double capacity_factor = 0;
  bool pad_to_capacity = false;  ///< --moe-pad-expert-input-to-capacity
  bool grouped_gemm = true;      ///< --moe-grouped-gemm: one grouped GEMM over local experts
  /// --moe-token-dispatcher-type: true "alltoall" (tokens sent to their experts' ranks),
  /// false "allgather" (every rank of the expert TP x ep group gathers all the group's
  /// tokens and keeps those of its experts; Megatron's argument default).
  bool all_to_all = true;
  int expert_tp = 0;             ///< --expert-tensor-parallel-size; 0: the model's tp
  /// Routing imbalance: rows of the busiest expert over the mean (>= 1; 1: balanced). Every
  /// rank waits for the busiest at the combine, so all are simulated with its load. Dropless
  /// routing only; with a capacity factor the busiest expert holds at most capacity.
  double load_imbalance = 1.0;
  /// --moe-shared-expert-intermediate-size: the width of the shared experts, one MLP that
  /// every token passes besides its routed experts (DeepSeekMoE, Qwen-MoE); 0: none. It runs
  /// after the routed experts' combine and is added to their output (MoELayer without
  /// --moe-shared-expert-overlap), tensor-parallel like the dense MLP, without biases.
  std::int64_t shared_ffn = 0;
  /// --moe-layer-freq: which layers have MoE MLPs (the others a dense MLP of the model's
  /// ffn_hidden). An integer N: layers 0, N, 2N, ... (Megatron's int form); or one 0 / 1 per
  /// layer (Megatron's list form, e.g. DeepSeek's dense first layer). Default: every layer.
  int layer_freq = 1;
  std::vector<bool> layer_pattern;  ///< the list form; empty: layer_freq

  [[nodiscard]] bool enabled() const { return experts > 0; }
  /// Layer `layer` (0-based, over the whole model) has an MoE MLP.
  [[nodiscard]] bool in_layer(std::int64_t layer) const {
    if (!enabled()) return false;
    if (!layer_pattern.empty()) return layer_pattern[static_cast<std::size_t>(layer)];
    return layer % layer_freq == 0;
  }
  /// Rows the busiest expert processes per routed row at the mean load: the capacity factor
  /// when inputs are padded to it; with a capacity factor, the imbalance capped at it (tokens
  /// beyond capacity are dropped); dropless, the imbalance.
  [[nodiscard]] double load_factor() const {
    if (capacity_factor <= 0) return load_imbalance;
    return pad_to_capacity ? capacity_factor : std::min(load_imbalance, capacity_factor);
  }
};

/// A video diffusion transformer (workload "architecture": "dit"), as NVIDIA's Cosmos world
/// foundation models (arXiv:2501.03575, section 5.1; the GeneralDIT network with block
/// "FA-CA-MLP") and NeMo's Megatron-Core DiT (nemo/collections/diffusion/models/dit) build it:
/// the latent video of the tokenizer is cut into patches of patch_temporal x patch_spatial^2
/// latent pixels, one token each, and every layer runs three sub-blocks, each behind an
/// adaptive layer norm (a LayerNorm without weights, then x (1 + scale) + shift) and closed
/// by a gated residual (x + gate y): full self-attention over all the video's tokens (no
/// mask), cross-attention from the video tokens to the text encoder's embeddings
/// (text_tokens x text_dim: T5-XXL's, precomputed by the data pipeline), and the MLP
/// (GeLU, no biases). Shift, scale and gate of the three sub-blocks (9 x hidden per sample)
/// come from the timestep embedding through one adaLN modulation per layer, a low-rank
/// pair (hidden x adaln_lora_dim, adaln_lora_dim x 9 hidden; AdaLN-LoRA) or, with
/// adaln_lora_dim 0, one hidden x 9 hidden projection. Queries and keys have a per-head
/// RMSNorm; positions are 3D rotary embeddings (no parameters). The loss is the EDM
/// denoising loss (Karras et al. 2022) on the latent: no LM head.
struct DitSpec {
  std::int64_t latent_frames = 0;   ///< latent frames (Cosmos: 121 video frames -> 16)
  std::int64_t latent_height = 0;   ///< latent pixels (704 -> 88 under the 8x8x8 tokenizer)
  std::int64_t latent_width = 0;    ///< (1280 -> 160)
  std::int64_t latent_channels = 16;
  std::int64_t patch_spatial = 2;
  std::int64_t patch_temporal = 1;
  bool padding_mask_channel = true;  ///< GeneralDIT's concat_padding_mask: one more input channel
  std::int64_t text_tokens = 512;    ///< cross-attention keys per sample
  std::int64_t text_dim = 1024;      ///< width of the text embeddings (crossattn_emb_channels)
  std::int64_t adaln_lora_dim = 256; ///< 0: a full hidden x 9 hidden modulation per layer

  [[nodiscard]] bool enabled() const { return latent_frames > 0; }
  /// Video tokens per sample: (frames / pt) x (height / ps) x (width / ps).
  [[nodiscard]] std::int64_t tokens() const {
    return (latent_frames / patch_temporal) * (latent_height / patch_spatial) * (latent_width / patch_spatial);
  }
  /// Latent elements per sample (channels x frames x height x width).
  [[nodiscard]] double latent_elements() const {
    return double(latent_channels) * double(latent_frames) * double(latent_height) * double(latent_width);
  }
  /// Inputs of the patch embedding per token: (channels + padding mask) x pt x ps^2.
  [[nodiscard]] std::int64_t patch_inputs() const {
    return (latent_channels + (padding_mask_channel ? 1 : 0)) * patch_temporal * patch_spatial * patch_spatial;
  }
  /// Outputs of the final layer per token: channels x pt x ps^2.
  [[nodiscard]] std::int64_t patch_outputs() const { return latent_channels * patch_temporal * patch_spatial * patch_spatial; }
};

struct TransformerSpec {
  std::string name;
  std::string file;
  TransformerKind kind = TransformerKind::kDecoder;
  std::int64_t hidden = 0;       ///< model width h
  std::int64_t heads = 0;        ///< query heads
  std::int64_t kv_heads = 0;     ///< key/value heads (= heads without GQA)
  std::int64_t layers = 0;
  std::int64_t seq_len = 0;      ///< tokens per sequence
  std::int64_t vocab = 0;        ///< tokenizer vocabulary (unpadded)
  std::int64_t ffn_hidden = 0;   ///< MLP inner width (default 4h)
  Activation activation = Activation::kGelu;
  PositionEmbedding position = PositionEmbedding::kLearned;
  bool tied_embeddings = true;   ///< LM head shares the input embedding
  DType precision = DType::kBf16;  ///< GEMM inputs and activations (tf32/fp32: fp32 storage)
  DType grad_reduce_dtype = DType::kFp32;  ///< data-parallel gradient all-reduce type
  std::int64_t micro_batch = 1;  ///< sequences per micro-batch
  std::int64_t global_batch = 1; ///< sequences per iteration, all DP ranks
  Recompute recompute = Recompute::kNone;
  /// Megatron-Core's --recompute-modules under selective recompute: the core attention's
  /// scores (core_attn, the default; no effect with flash attention), the two norms
  /// (layernorm: their outputs are discarded and recomputed before the backward that reads
  /// them) and the experts' activation (moe_act: its output is discarded and recomputed
  /// before fc2's backward).
  bool recompute_core_attn = true;  ///< with selective: the unfused attention's scores
  bool recompute_norms = false;
  bool recompute_moe_act = false;
  /// Selective recompute of the unfused core attention (scores not kept).
  [[nodiscard]] bool recomputes_core_attention() const { return recompute == Recompute::kSelective && recompute_core_attn; }
  [[nodiscard]] bool recomputes_norms() const { return recompute == Recompute::kSelective && recompute_norms; }
  [[nodiscard]] bool recomputes_moe_act() const { return recompute == Recompute::kSelective && recompute_moe_act; }
  bool distributed_optimizer = false;  ///< Adam states sharded over DP (reduce-scatter + all-gather)
  /// Megatron's --overlap-grad-reduce: the DP gradient reduction is issued per layer as soon
  /// as the last micro-batch's backward of that layer ends, overlapping the rest of the
  /// backward, instead of once after the flush.
  bool overlap_grad_reduce = false;
  /// Megatron's --overlap-param-gather (distributed optimizer and overlap_grad_reduce only):
  /// the parameter all-gather after the optimizer step moves into the next iteration's first
  /// forward, one layer's bucket ahead of the layer that needs it.
  bool overlap_param_gather = false;
  /// Transformer Engine's TP communication overlap (userbuffers, sequence parallelism
  /// only): each all-gather runs beside the column-parallel GEMM that consumes it and each
  /// reduce-scatter beside the row-parallel GEMM that produces it.
  bool tp_comm_overlap = false;
  /// Megatron's --fp8-param-gather (NeMo's FP8 recipes: fp8_param_gather): under FP8 the
  /// weights are kept as FP8 tensors (1 B, and Transformer Engine's cached transpose, 1 B)
  /// instead of bf16 weights plus FP8 copies, and the distributed optimizer all-gathers them
  /// in FP8 (1 B per parameter).
  bool fp8_param_gather = false;
  int tp = 1, pp = 1;
  /// Virtual pipeline stages (model chunks) per pipeline rank, Megatron's
  /// --virtual-pipeline-model-parallel-size; > 1: the interleaved 1F1B schedule.
  int vp = 1;
  /// Layers of the first and of the last pipeline stage where they differ from the others
  /// (Megatron-Core's --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers,
  /// workload keys parallelism.first_stage_layers / last_stage_layers); the other stages share
  /// the remaining layers evenly. 0: an even split. With virtual stages (vp > 1) each stage's
  /// layers split evenly over its vp model chunks, as Megatron-Core builds them.
  std::int64_t first_stage_layers = 0, last_stage_layers = 0;
  /// Megatron-Core's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split
  /// (workload keys parallelism.account_for_embedding / account_for_loss): the embedding and
  /// the loss count as one layer each when the layers split evenly over pp x vp model chunks,
  /// so the first model chunk holds one transformer layer fewer (and the last one, for the
  /// loss). Not with first_stage_layers / last_stage_layers.
  bool account_for_embedding = false, account_for_loss = false;
  /// Context parallelism (Megatron's --context-parallel-size): each sequence split over cp
  /// ranks, attention over the whole sequence by passing keys and values around the CP ring.
  int cp = 1;
  /// Megatron's overlap_p2p_comm (on unless --no-overlap-p2p-communication), interleaved
  /// schedule with a stream-ordered runtime only: a forward's transfers run beside the next
  /// backward and a backward's beside the next forward; each is waited for only where its
  /// tensor is needed.
  bool overlap_p2p_comm = true;
  int dp = 0;                    ///< 0: "auto" = GPUs / (tp x cp x pp)
  /// Expert parallelism (--expert-model-parallel-size): the experts split over ep ranks of
  /// a stage; ep x expert_tp must divide tp x cp x dp (Megatron-Core's MoE parallel folding).
  int ep = 1;
  MoeSpec moe;
  MlaSpec mla;
  DitSpec dit;  ///< set (enabled) exactly when kind is kDiffusion
  bool sequence_parallel = false;
  AttentionImpl attention = AttentionImpl::kFlash;
  /// The fused-attention kernel of "flash" attention (workload key "attention_kernel"):
  /// FlashAttention-2 (PyTorch SDPA's flash backend, the flash-attn package), FlashAttention-3,
  /// or cuDNN's (Transformer Engine's fused attention). Calibrations fit each separately.
  AttentionKernel attention_kernel = AttentionKernel::kFlash2;
  /// The workload file names attention_kernel; false: the runtime profile's choice for the
  /// GPU applies where it has one (RuntimeProfile::attention_kernels), else flash2.
  bool attention_kernel_stated = false;
  /// Why attention_kernel is what it is, for the report: the workload's, a runtime rule's, or
  /// perfcast's default.
  std::string attention_kernel_basis = "perfcast's default: neither the workload nor its runtime names one";
  double dropout = 0.1;          ///< hidden and attention dropout probability (0: no dropout kernels)
  /// Pipeline transfers block the host (Megatron-DeepSpeed: wait + device synchronize);
  /// false: stream-ordered only. Not a workload key: set by the runtime profile.
  bool pipeline_host_blocking = true;
  /// Simulate one rank per pipeline stage (tp and dp index 0) and mirror the others, whose
  /// programs differ only by group membership. Not a workload key: false in tests that
  /// compare with the full simulation.
  bool symmetric_simulation = true;

  /// Workload key "head_dim" (Megatron's kv_channels, Hugging Face's head_dim): elements per
  /// attention head where they are not hidden / heads (Qwen3, Gemma); 0: hidden / heads.
  std::int64_t explicit_head_dim = 0;

  /// Layers held by pipeline stage `stage` (all its model chunks), and the index of its first
  /// layer under the 1F1B schedule (vp 1), after first_stage_layers / last_stage_layers.
  [[nodiscard]] std::int64_t stage_layer_count(int stage) const;
  [[nodiscard]] std::int64_t stage_first_layer(int stage) const;
  /// Layers of one model chunk of `stage` (stage_layer_count / vp), and the index of the first
  /// layer of its model chunk `chunk` (0 .. vp-1): Megatron-Core's layer offset, chunk x
  /// (layers / vp) plus the chunk layers of the stages before (get_transformer_layer_offset;
  /// (chunk x pp + stage) x chunk layers when the stages are even).
  /// With the embedding or the loss counted (account_for_embedding / account_for_loss), chunk 0
  /// of stage 0 and the last chunk of the last stage hold one transformer layer fewer, and the
  /// offsets are those of the even split less the embedding's place.
  [[nodiscard]] std::int64_t chunk_layer_count(int stage, int chunk) const;
  [[nodiscard]] std::int64_t chunk_first_layer(int stage, int chunk) const;
  [[nodiscard]] bool uneven_stages() const { return first_stage_layers > 0 || last_stage_layers > 0; }
  /// A split of the layers other than an even one: uneven stages, or the embedding or the loss
  /// counted as a layer.
  [[nodiscard]] bool custom_pipeline_split() const { return uneven_stages() || account_for_embedding || account_for_loss; }
  /// The layers the even split divides: the transformer layers plus one for the embedding and
  /// one for the loss where they are counted.
  [[nodiscard]] std::int64_t split_layers() const { return layers + (account_for_embedding ? 1 : 0) + (account_for_loss ? 1 : 0); }
  [[nodiscard]] std::int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden / heads; }
  /// Width of the attention's queries (and of its output before the projection), heads x
  /// head_dim: hidden unless "head_dim" says otherwise.
  [[nodiscard]] std::int64_t attention_width() const { return heads * head_dim(); }
  /// A video diffusion transformer (DitSpec): no vocabulary, adaLN sub-blocks, cross-attention.
  [[nodiscard]] bool diffusion() const { return kind == TransformerKind::kDiffusion; }
  /// Attention under a causal mask (decoders only).
  [[nodiscard]] bool causal() const { return kind == TransformerKind::kDecoder; }
  /// Elements per head of queries and keys / of values and the attention output:
  /// head_dim() both, or multi-latent attention's.
  [[nodiscard]] std::int64_t qk_dim() const { return mla.enabled() ? mla.qk_head_dim + mla.qk_rope_head_dim : head_dim(); }
  [[nodiscard]] std::int64_t v_dim() const { return mla.enabled() ? mla.v_head_dim : head_dim(); }
  /// Attention parameters of one layer on one of `tp` tensor-parallel ranks: projections
  /// with biases (Megatron's default), MLA's latent norms; MLA's down-projections and norms
  /// are duplicated on every TP rank.
  [[nodiscard]] double attention_parameters(int tp) const;
  /// FP8 as Transformer Engine runs it (delayed-scaling recipe): only the GEMMs of the
  /// linear layers (QKV, attention output, MLP fc1 / fc2) take FP8 inputs; attention,
  /// norms, activations, the LM head and all communication stay in bf16.
  [[nodiscard]] bool fp8_linear_layers() const { return precision == DType::kFp8; }
  /// Type of stored activations, attention and communicated tensors: bf16 under FP8.
  [[nodiscard]] DType activation_dtype() const { return precision == DType::kFp8 ? DType::kBf16 : precision; }
  /// Vocabulary padded to a multiple of 128 x tp (Megatron's _vocab_size_with_padding).
  [[nodiscard]] std::int64_t padded_vocab() const;
  /// Micro-batches per iteration and pipeline: global / (micro x dp). Needs dp resolved.
  [[nodiscard]] std::int64_t micro_batches() const { return global_batch / (micro_batch * dp); }
  /// Ranks per pipeline stage: tp x cp x dp.
  [[nodiscard]] int stage_ranks() const { return tp * cp * dp; }
  /// Parameters of the whole model (embedding counted once when tied).
  [[nodiscard]] double parameters() const;
  /// Parameters one token meets: parameters() with each layer's experts counted top_k
  /// times instead of `experts` times (= parameters() for dense MLPs).
  [[nodiscard]] double active_parameters() const;
  /// Parameters of one MoE layer's shared experts (fc1, fc2, no biases); 0 without them.
  [[nodiscard]] double shared_expert_parameters() const;
  /// Expert tensor parallelism: moe.expert_tp, or tp when unset.
  [[nodiscard]] int expert_tp() const { return moe.expert_tp > 0 ? moe.expert_tp : tp; }
  /// Expert data parallelism: ranks of a stage holding the same experts.
  [[nodiscard]] int expert_dp() const { return stage_ranks() / (ep * expert_tp()); }
  /// MoE MLP width (moe.ffn_hidden, default ffn_hidden).
  [[nodiscard]] std::int64_t expert_ffn() const { return moe.ffn_hidden > 0 ? moe.ffn_hidden : ffn_hidden; }
};

/// Parameters of one diffusion-transformer layer on one of `tp` ranks (self- and
/// cross-attention, MLP, the per-head query / key norms; the adaLN modulation whole on every
/// rank, as NeMo's AdaLN is a plain replicated nn.Linear). 0 unless w.diffusion().
[[nodiscard]] double dit_layer_parameters(const TransformerSpec& w, int tp);
/// Parameters of a diffusion transformer outside its layers on the first stage (patch
/// embedding, timestep embedding and its RMSNorm) and on the last (the final layer's adaLN
/// modulation and output projection); replicated over TP. 0 unless w.diffusion().
[[nodiscard]] double dit_input_parameters(const TransformerSpec& w);
[[nodiscard]] double dit_output_parameters(const TransformerSpec& w);
/// Model FLOPs of one diffusion-transformer sample, forward and backward (3 x the forward's
/// multiply-adds x 2), no recomputation: 6 x (the parameters applied to each video token x
/// tokens + the cross-attention key / value projections x text tokens + the adaLN and
/// timestep parameters once) + 12 L h s (s + text tokens) for the attention scores and
/// values of self- and cross-attention (h = heads x head_dim).
[[nodiscard]] double dit_model_flops_per_sample(const TransformerSpec& w);

/// Reads a transformer workload (schema "perfcast.workload" 1.x, "model": "transformer").
/// Throws ConfigError (file, JSON path, message).
[[nodiscard]] TransformerSpec parse_transformer(const JsonDocument& doc);
/// ConfigError at /moe/layer_freq when the list form does not name every layer once or
/// names no MoE layer.
void check_moe_layers(const TransformerSpec& w);

/// Checks the parallelism against a world size and resolves dp "auto". Throws ConfigError
/// naming "/parallelism" when tp x pp x dp differs from `world`, or when a size does not
/// divide (heads over tp, layers over pp, global batch over micro x dp, ...).
void resolve_parallelism(TransformerSpec& w, int world);

}  // namespace perfcast
