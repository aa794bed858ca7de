#include "model/graph/transformer_spec.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace perfcast {
namespace {

/// Megatron-Core's --recompute-modules (megatron/core/transformer/transformer_config.py):
/// the modules perfcast models; the others ("mlp", "moe", "shared_experts", "mla_up_proj")
/// are refused by name rather than ignored. As in Megatron they take effect under
/// "recompute": "selective" only (`plan` may try none or full on the same file).
void parse_recompute_modules(const JsonValue& v, TransformerSpec& w) {
  if (!v.is_array()) v.fail("expected an array of module names, e.g. [\"core_attn\", \"layernorm\", \"moe_act\"]");
  const JsonArray a = v.as_array();
  a.require_size(1, 8);
  w.recompute_core_attn = false;  // listed modules replace Megatron's default ["core_attn"]
  for (std::size_t i = 0; i < a.size(); ++i) {
    const JsonValue m = a[i];
    if (!m.is_string()) m.fail("expected a module name (core_attn, layernorm, moe_act)");
    const std::string name = m.as_string();
    if (name == "layernorm") w.recompute_norms = true;
    else if (name == "moe_act") w.recompute_moe_act = true;
    else if (name == "mlp" || name == "moe" || name == "shared_experts" || name == "mla_up_proj")
      m.fail(fmt::format("recompute module \"{}\" is not modelled (modelled: core_attn, layernorm, moe_act)", name));
    else if (m.as_enum({"core_attn", "layernorm", "moe_act"}) == "core_attn") w.recompute_core_attn = true;
  }
}

constexpr std::int64_t kMaxWidth = std::int64_t{1} << 20;

DType dtype_of(const std::string& s) { return *dtype_from_name(s); }

/// The "mla" object: Megatron-Core's MLATransformerConfig fields (see MlaSpec).
MlaSpec parse_mla(const JsonObject& o) {
  MlaSpec m;
  m.q_lora_rank = o.integer_or("q_lora_rank", 0, kMaxWidth, 0);
  m.kv_lora_rank = o.integer("kv_lora_rank", 1, kMaxWidth);
  m.qk_head_dim = o.integer("qk_head_dim", 1, 4096);
  m.qk_rope_head_dim = o.integer("qk_rope_head_dim", 1, 4096);
  m.v_head_dim = o.integer("v_head_dim", 1, 4096);
  o.finish();
  return m;
}

/// What perfcast models of multi-latent attention, and what it refuses.
void check_mla(const TransformerSpec& w) {
  if (w.kv_heads != w.heads)
    throw ConfigError(w.file, "/kv_heads", "multi-latent attention has one key / value head per query head: leave kv_heads out");
  if (w.cp > 1)
    throw ConfigError(w.file, "/parallelism/cp", "context parallelism with multi-latent attention is not modelled");
  if (w.tp_comm_overlap)
    throw ConfigError(w.file, "/tp_comm_overlap", "TP communication overlap with multi-latent attention is not modelled");
}

/// The "moe" object: Megatron-Core's MoE arguments (see MoeSpec).
MoeSpec parse_moe(const JsonObject& o) {
  MoeSpec m;
  m.experts = static_cast<int>(o.integer("experts", 1, 1 << 16));
  m.top_k = static_cast<int>(o.integer_or("top_k", 1, 1 << 16, 2));
  m.ffn_hidden = o.integer_or("ffn_hidden", 1, kMaxWidth, 0);
  m.capacity_factor = o.number_or("capacity_factor", 0.0, 1000.0, 0.0);
  m.pad_to_capacity = o.bool_or("pad_to_capacity", false);
  m.grouped_gemm = o.bool_or("grouped_gemm", true);
  m.all_to_all = o.enum_or("dispatcher", {"alltoall", "allgather"}, "alltoall") == "alltoall";
  m.expert_tp = static_cast<int>(o.integer_or("expert_tp", 1, 4096, 0));
  m.load_imbalance = o.number_or("load_imbalance", 1.0, 1000.0, 1.0);
  m.shared_ffn = o.integer_or("shared_expert_ffn_hidden", 1, kMaxWidth, 0);
  if (const auto freq = o.find("layer_freq")) {
    if (freq->raw().is_array()) {
      const JsonArray pattern = freq->as_array();
      pattern.require_size(1, 1 << 20);
      for (std::size_t i = 0; i < pattern.size(); ++i) m.layer_pattern.push_back(pattern[i].as_integer(0, 1) == 1);
    } else {
      m.layer_freq = static_cast<int>(freq->as_integer(1, 1 << 20));
    }
  }
  o.finish();
  if (m.pad_to_capacity && m.capacity_factor <= 0)
    o.fail("pad_to_capacity", "padding to capacity needs a \"capacity_factor\" (Megatron's --moe-expert-capacity-factor)");
  return m;
}

/// The "dit" object (see DitSpec), whose patch sizes must divide the latent video.
DitSpec parse_dit(const JsonObject& o) {
  DitSpec d;
  d.latent_frames = o.integer("latent_frames", 1, 1 << 16);
  d.latent_height = o.integer("latent_height", 1, 1 << 16);
  d.latent_width = o.integer("latent_width", 1, 1 << 16);
  d.latent_channels = o.integer_or("latent_channels", 1, 4096, 16);
  d.patch_spatial = o.integer_or("patch_spatial", 1, 64, 2);
  d.patch_temporal = o.integer_or("patch_temporal", 1, 64, 1);
  d.padding_mask_channel = o.bool_or("padding_mask_channel", true);
  d.text_tokens = o.integer_or("text_tokens", 1, 1 << 20, 512);
  d.text_dim = o.integer_or("text_dim", 1, kMaxWidth, 1024);
  d.adaln_lora_dim = o.integer_or("adaln_lora_dim", 0, kMaxWidth, 256);
  o.finish();
  if (d.latent_frames % d.patch_temporal != 0)
    o.fail("patch_temporal", fmt::format("{} latent frames do not divide into patches of {}", d.latent_frames, d.patch_temporal));
  if (d.latent_height % d.patch_spatial != 0 || d.latent_width % d.patch_spatial != 0)
    o.fail("patch_spatial", fmt::format("latent {} x {} does not divide into patches of {}", d.latent_height, d.latent_width, d.patch_spatial));
  if (d.tokens() > (std::int64_t{1} << 24))
    o.fail("latent_frames", fmt::format("{} tokens per sample; perfcast models at most {}", d.tokens(), std::int64_t{1} << 24));
  return d;
}

/// A diffusion transformer has no vocabulary, MoE or MLA in perfcast; its sequence is the
/// latent video's patches.
void check_dit(const JsonObject& root, TransformerSpec& w) {
  if (!w.dit.enabled()) root.fail("dit", "\"architecture\": \"dit\" needs a \"dit\" object (latent_frames, latent_height, latent_width, ...)");
  if (root.find("vocab")) root.fail("vocab", "a diffusion transformer has no vocabulary: leave \"vocab\" out");
  if (root.find("tied_embeddings")) root.fail("tied_embeddings", "a diffusion transformer has no token embedding: leave it out");
  if (w.position == PositionEmbedding::kLearned && root.find("position_embedding"))
    root.fail("position_embedding", "the diffusion transformer's positions are 3D rotary embeddings: \"rope\" or leave it out");
  if (const auto s = root.find("seq_len"); s && s->as_integer(1, std::int64_t{1} << 24) != w.dit.tokens())
    root.fail("seq_len", fmt::format("the latent video has {} tokens (frames / patch_temporal x height / patch_spatial x "
                                     "width / patch_spatial); leave \"seq_len\" out or set it to that", w.dit.tokens()));
  if (root.find("dropout") && w.dropout > 0)
    root.fail("dropout", "dropout in a diffusion transformer is not modelled (Cosmos and NeMo's DiT train without): 0 or leave it out");
  if (w.moe.enabled()) root.fail("moe", "mixture-of-experts diffusion transformers are not modelled");
  if (w.mla.enabled()) root.fail("mla", "multi-latent attention in a diffusion transformer is not modelled");
  w.seq_len = w.dit.tokens();
  w.dropout = 0;  // the default 0.1 is Megatron's for GPT; DiT blocks have none
  w.vocab = 0;
  w.tied_embeddings = false;
  w.position = PositionEmbedding::kRope;
}

/// Megatron-Core's split with the embedding and / or the loss counted as a layer: the layers
/// plus those divide evenly over pp x vp model chunks, and every stage keeps a layer.
void check_accounted_split(const TransformerSpec& w, const std::string& at) {
  const std::string key = w.account_for_embedding ? "/account_for_embedding" : "/account_for_loss";
  if (w.uneven_stages())
    throw ConfigError(w.file, at + key, "counting the embedding or the loss as a layer does not combine with first_stage_layers / last_stage_layers");
  if (w.pp < 2) throw ConfigError(w.file, at + key, "counting the embedding or the loss as a layer needs pp >= 2");
  const std::int64_t chunks = std::int64_t(w.pp) * w.vp;
  if (w.split_layers() % chunks != 0) {
    throw ConfigError(w.file, at + key,
                      fmt::format("{} layers and {} counted for the embedding and the loss do not divide over pp {} x vp {} "
                                  "model chunks",
                                  w.layers, w.split_layers() - w.layers, w.pp, w.vp));
  }
  for (int s = 0; s < w.pp; ++s)
    if (w.stage_layer_count(s) < 1)
      throw ConfigError(w.file, at + key, fmt::format("stage {} would hold no transformer layer", s));
}
}  // namespace

void check_moe_layers(const TransformerSpec& w) {
  const auto& p = w.moe.layer_pattern;
  if (!p.empty() && static_cast<std::int64_t>(p.size()) != w.layers)
    throw ConfigError(w.file, "/moe/layer_freq", fmt::format("the pattern lists {} layers, the model has {}", p.size(), w.layers));
  if (!p.empty() && std::find(p.begin(), p.end(), true) == p.end())
    throw ConfigError(w.file, "/moe/layer_freq", "no layer has an MoE MLP (a 1 in the pattern); remove \"moe\" for a dense model");
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kGelu: return "gelu";
    case Activation::kSwiglu: return "swiglu";
    case Activation::kGeglu: return "geglu";
    case Activation::kRelu: return "relu";
    case Activation::kSquaredRelu: return "squared_relu";
  }
  return "gelu";
}

std::int64_t TransformerSpec::padded_vocab() const {
  if (vocab == 0) return 0;  // diffusion transformers
  const std::int64_t multiple = 128 * tp;  // Megatron: make_vocab_size_divisible_by (128) x tp
  return (vocab + multiple - 1) / multiple * multiple;
}

namespace {

/// Parameters of one layer's MLP: dense (fc1, fc2 with biases), or the router (hidden x
/// experts) and `experts_counted` expert MLPs without biases (Megatron's MoE recipes run
/// --disable-bias-linear).
double mlp_parameters(const TransformerSpec& w, double experts_counted, bool moe_layer) {
  const double h = double(w.hidden), gate = fc1_multiplier(w.activation);
  if (!moe_layer) {
    const double f1 = gate * double(w.ffn_hidden);
    return h * f1 + f1 + double(w.ffn_hidden) * h + h;
  }
  const double f = double(w.expert_ffn());
  return h * w.moe.experts + experts_counted * (h * gate * f + f * h) + w.shared_expert_parameters();  // shared: always active
}

double total_parameters(const TransformerSpec& w, double experts_counted) {
  const double h = double(w.hidden);
  if (w.diffusion()) return double(w.layers) * dit_layer_parameters(w, 1) + dit_input_parameters(w) + dit_output_parameters(w);
  double layers = 0;
  for (std::int64_t l = 0; l < w.layers; ++l)  // + two layer norms (weight, bias) each
    layers += w.attention_parameters(1) + mlp_parameters(w, experts_counted, w.moe.in_layer(l)) + 4 * h;
  const std::int64_t padded = w.padded_vocab();
  double emb = double(padded) * h + (w.position == PositionEmbedding::kLearned ? double(w.seq_len) * h : 0.0);
  if (!w.tied_embeddings) emb += double(padded) * h;
  return layers + emb + 2 * h;  // + final layer norm
}

}  // namespace

namespace {
/// Stages that share the layers the first and last stage do not state, and those layers.
std::pair<std::int64_t, std::int64_t> even_stages_and_layers(const TransformerSpec& w) {
  const std::int64_t stages = w.pp - (w.first_stage_layers > 0 ? 1 : 0) - (w.last_stage_layers > 0 ? 1 : 0);
  return {stages, w.layers - w.first_stage_layers - w.last_stage_layers};
}
}  // namespace

std::int64_t TransformerSpec::stage_layer_count(int stage) const {
  if (account_for_embedding || account_for_loss) {
    std::int64_t n = 0;
    for (int v = 0; v < vp; ++v) n += chunk_layer_count(stage, v);
    return n;
  }
  if (!uneven_stages()) return layers / pp;
  if (stage == 0 && first_stage_layers > 0) return first_stage_layers;
  if (stage + 1 == pp && last_stage_layers > 0) return last_stage_layers;
  const auto [stages, rest] = even_stages_and_layers(*this);
  return stages > 0 ? rest / stages : 0;
}

std::int64_t TransformerSpec::stage_first_layer(int stage) const {
  if (account_for_embedding || account_for_loss) return chunk_first_layer(stage, 0);
  if (stage <= 0) return 0;
  if (!uneven_stages()) return std::int64_t(stage) * (layers / pp);
  // The first stage's layers, then stage - 1 middle stages (the last stage has none after it).
  const auto [stages, rest] = even_stages_and_layers(*this);
  const std::int64_t middle = stages > 0 ? rest / stages : 0;
  return first_stage_layers > 0 ? first_stage_layers + std::int64_t(stage - 1) * middle : std::int64_t(stage) * middle;
}

std::int64_t TransformerSpec::chunk_layer_count(int stage, int chunk) const {
  if (!(account_for_embedding || account_for_loss)) return stage_layer_count(stage) / vp;
  std::int64_t n = split_layers() / (std::int64_t(pp) * vp);
  if (account_for_embedding && stage == 0 && chunk == 0) --n;
  if (account_for_loss && stage + 1 == pp && chunk + 1 == vp) --n;
  return n;
}

std::int64_t TransformerSpec::chunk_first_layer(int stage, int chunk) const {
  if (account_for_embedding || account_for_loss) {
    // Virtual chunk v x pp + s of the even split over the layers with the embedding and the
    // loss counted; every chunk after the first starts one layer earlier for the embedding.
    const std::int64_t per_chunk = split_layers() / (std::int64_t(pp) * vp);
    const std::int64_t virtual_first = (std::int64_t(chunk) * pp + stage) * per_chunk;
    return account_for_embedding && virtual_first > 0 ? virtual_first - 1 : virtual_first;
  }
  // The stages before hold whole multiples of vp layers (checked), one vp-th in each chunk.
  return std::int64_t(chunk) * (layers / vp) + stage_first_layer(stage) / vp;
}

double TransformerSpec::parameters() const { return total_parameters(*this, moe.experts); }

double TransformerSpec::attention_parameters(int tp) const {
  const double h = double(hidden), t = tp, n = double(heads);
  const double proj = h * n * double(v_dim()) / t + h;  // row-parallel output projection, its bias whole
  if (!mla.enabled()) return (h + 1) * (n + 2.0 * kv_heads) * double(head_dim()) / t + proj;
  const double q_width = n * double(qk_dim()) / t;  // per TP rank
  const double q = mla.q_lora_rank > 0 ? h * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * q_width : h * q_width;
  const double kv = h * double(mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank +
                    mla.kv_lora_rank * n * double(mla.qk_head_dim + mla.v_head_dim) / t;
  return q + kv + proj;
}

double TransformerSpec::shared_expert_parameters() const {
  const double h = double(hidden), s = double(moe.shared_ffn), gate = fc1_multiplier(activation);
  return h * gate * s + s * h;
}

double TransformerSpec::active_parameters() const { return total_parameters(*this, moe.top_k); }

namespace {

/// The adaLN modulation's parameters producing `chunks` x hidden values per sample: the
/// low-rank pair (hidden x r, r x chunks hidden) or one hidden x chunks hidden projection.
double adaln_parameters(const TransformerSpec& w, double chunks) {
  const double h = double(w.hidden), r = double(w.dit.adaln_lora_dim);
  return r > 0 ? h * r + r * chunks * h : chunks * h * h;
}

/// Parameters a diffusion layer applies to every video token, unsharded: QKV and output of
/// self-attention, query and output of cross-attention, the MLP (no biases).
double dit_token_layer_parameters(const TransformerSpec& w) {
  const double h = double(w.hidden), a = double(w.heads) * double(w.head_dim()), kv = double(w.kv_heads) * double(w.head_dim());
  return h * (a + 2 * kv) + a * h + 2 * h * a + 2 * h * double(w.ffn_hidden);
}

/// The timestep embedding's two layers: h x h, then h x 3h (its 3h output feeds the layers'
/// AdaLN-LoRA) or h x h without LoRA. Applied once per sample.
double dit_timestep_parameters(const TransformerSpec& w) {
  const double h = double(w.hidden);
  return h * h + h * (w.dit.adaln_lora_dim > 0 ? 3 * h : h);
}

}  // namespace

double dit_layer_parameters(const TransformerSpec& w, int tp) {
  if (!w.diffusion()) return 0;
  const double t = tp, a = double(w.heads) * double(w.head_dim());
  const double norms = 4.0 * double(w.head_dim());  // per-head query and key RMSNorm weights, both attentions
  const double text_kv = 2.0 * double(w.dit.text_dim) * a;  // cross-attention keys and values, column-parallel
  return (dit_token_layer_parameters(w) + text_kv) / t + norms + adaln_parameters(w, 9);
}

double dit_input_parameters(const TransformerSpec& w) {
  if (!w.diffusion()) return 0;
  const double h = double(w.hidden);
  // Patch embedding (no bias), the timestep embedding and its RMSNorm weight.
  return double(w.dit.patch_inputs()) * h + dit_timestep_parameters(w) + h;
}

double dit_output_parameters(const TransformerSpec& w) {
  if (!w.diffusion()) return 0;
  return adaln_parameters(w, 2) + double(w.hidden) * double(w.dit.patch_outputs());  // shift and scale; projection to patches
}

double dit_model_flops_per_sample(const TransformerSpec& w) {
  if (!w.diffusion()) return 0;
  const double L = double(w.layers), s = double(w.seq_len), text = double(w.dit.text_tokens), h = double(w.hidden);
  const double a = double(w.heads) * double(w.head_dim());
  const double per_token = L * dit_token_layer_parameters(w) + double(w.dit.patch_inputs()) * h + h * double(w.dit.patch_outputs());
  const double per_text_token = L * 2.0 * double(w.dit.text_dim) * a;
  const double per_sample = dit_timestep_parameters(w) + L * adaln_parameters(w, 9) + adaln_parameters(w, 2);
  return 6.0 * (per_token * s + per_text_token * text + per_sample) + 12.0 * L * a * s * (s + text);
}

TransformerSpec parse_transformer(const JsonDocument& doc) {
  const JsonObject root(doc);
  root.require_schema("perfcast.workload", 1);
  TransformerSpec w;
  w.file = doc.file;
  w.name = root.string("name");
  [[maybe_unused]] const std::string model = root.at("model").as_enum({"transformer"});
  const std::string arch = root.enum_or("architecture", {"decoder", "encoder", "dit"}, "decoder");
  w.kind = arch == "decoder" ? TransformerKind::kDecoder : arch == "encoder" ? TransformerKind::kEncoder : TransformerKind::kDiffusion;
  w.hidden = root.integer("hidden", 1, kMaxWidth);
  w.heads = root.integer("heads", 1, 4096);
  w.kv_heads = root.integer_or("kv_heads", 1, 4096, w.heads);
  if (root.find("head_dim")) w.explicit_head_dim = root.integer("head_dim", 1, 4096);
  w.layers = root.integer("layers", 1, 10000);
  if (!w.diffusion()) {
    w.seq_len = root.integer("seq_len", 1, std::int64_t{1} << 24);
    w.vocab = root.integer("vocab", 1, std::int64_t{1} << 24);
  }
  w.ffn_hidden = root.integer_or("ffn_hidden", 1, kMaxWidth, 4 * w.hidden);
  const std::string act = root.enum_or("activation", {"gelu", "swiglu", "geglu", "relu", "squared_relu"}, "gelu");
  for (const Activation a : {Activation::kGelu, Activation::kSwiglu, Activation::kGeglu, Activation::kRelu, Activation::kSquaredRelu})
    if (act == activation_name(a)) w.activation = a;
  w.position = root.enum_or("position_embedding", {"learned", "rope"}, "learned") == "learned" ? PositionEmbedding::kLearned
                                                                                               : PositionEmbedding::kRope;
  w.tied_embeddings = root.bool_or("tied_embeddings", true);
  w.precision = dtype_of(root.enum_or("precision", {"fp32", "tf32", "bf16", "fp16", "fp8"}, "bf16"));
  w.grad_reduce_dtype = dtype_of(root.enum_or("grad_reduce_dtype", {"fp32", "bf16", "fp16"}, "fp32"));
  w.micro_batch = root.integer("micro_batch", 1, std::int64_t{1} << 20);
  w.global_batch = root.integer("global_batch", 1, std::int64_t{1} << 30);
  const std::string rc = root.enum_or("recompute", {"none", "selective", "full"}, "none");
  w.recompute = rc == "none" ? Recompute::kNone : rc == "selective" ? Recompute::kSelective : Recompute::kFull;
  if (const auto modules = root.find("recompute_modules")) parse_recompute_modules(*modules, w);
  [[maybe_unused]] const std::string opt = root.enum_or("optimizer", {"adam"}, "adam");
  w.distributed_optimizer = root.bool_or("distributed_optimizer", false);
  w.overlap_grad_reduce = root.bool_or("overlap_grad_reduce", false);
  w.overlap_param_gather = root.bool_or("overlap_param_gather", false);
  if (w.overlap_param_gather && !(w.distributed_optimizer && w.overlap_grad_reduce))
    root.fail("overlap_param_gather", "Megatron overlaps the parameter all-gather only with \"distributed_optimizer\" and "
                                      "\"overlap_grad_reduce\" both true");
  const std::string schedule = root.enum_or("schedule", {"1f1b", "interleaved"}, "");
  w.sequence_parallel = root.bool_or("sequence_parallel", false);
  w.tp_comm_overlap = root.bool_or("tp_comm_overlap", false);
  w.fp8_param_gather = root.bool_or("fp8_param_gather", false);
  if (w.fp8_param_gather && w.precision != DType::kFp8)
    root.fail("fp8_param_gather", "FP8 parameters need \"precision\": \"fp8\"");
  w.overlap_p2p_comm = root.bool_or("overlap_p2p_comm", true);
  if (w.tp_comm_overlap && !w.sequence_parallel)
    root.fail("tp_comm_overlap", "TP communication overlap (Transformer Engine userbuffers) needs \"sequence_parallel\": true");
  w.attention = root.enum_or("attention", {"flash", "unfused"}, "flash") == "flash" ? AttentionImpl::kFlash : AttentionImpl::kUnfused;
  w.attention_kernel = *attention_kernel_from_name(root.enum_or("attention_kernel", {"flash2", "flash3", "cudnn"}, "flash2"));
  w.attention_kernel_stated = root.find("attention_kernel").has_value();
  if (w.attention_kernel_stated) w.attention_kernel_basis = "the workload's attention_kernel";
  if (w.attention == AttentionImpl::kUnfused && root.find("attention_kernel"))
    root.fail("attention_kernel", "applies to \"attention\": \"flash\" only");
  w.dropout = root.number_or("dropout", 0.0, 0.99, 0.1);
  if (const auto par = root.find("parallelism")) {
    const JsonObject p = par->as_object();
    w.tp = static_cast<int>(p.integer_or("tp", 1, 4096, 1));
    w.pp = static_cast<int>(p.integer_or("pp", 1, 4096, 1));
    w.vp = static_cast<int>(p.integer_or("vp", 1, 64, 1));
    w.first_stage_layers = p.integer_or("first_stage_layers", 0, 10000, 0);  // 0: an even split
    w.last_stage_layers = p.integer_or("last_stage_layers", 0, 10000, 0);
    w.account_for_embedding = p.bool_or("account_for_embedding", false);
    w.account_for_loss = p.bool_or("account_for_loss", false);
    w.cp = static_cast<int>(p.integer_or("cp", 1, 1024, 1));
    w.ep = static_cast<int>(p.integer_or("ep", 1, 4096, 1));
    if (const auto dp = p.find("dp")) {
      if (dp->is_string()) {
        [[maybe_unused]] const std::string a = dp->as_enum({"auto"});
        w.dp = 0;
      } else {
        w.dp = static_cast<int>(dp->as_integer(1, 1 << 20));
      }
    }
    p.finish();
  }
  if (const auto moe = root.find("moe")) w.moe = parse_moe(moe->as_object());
  if (const auto mla = root.find("mla")) w.mla = parse_mla(mla->as_object());
  if (const auto dit = root.find("dit")) {
    if (!w.diffusion()) root.fail("dit", "applies to \"architecture\": \"dit\" only");
    w.dit = parse_dit(dit->as_object());
  }
  if (w.diffusion()) check_dit(root, w);
  root.finish();
  if (w.mla.enabled()) check_mla(w);
  if (w.ep > 1 && !w.moe.enabled())
    throw ConfigError(doc.file, "/parallelism/ep", "expert parallelism needs experts: add \"moe\": {\"experts\": N, \"top_k\": K}");
  if (w.moe.enabled() && w.moe.top_k > w.moe.experts)
    throw ConfigError(doc.file, "/moe/top_k", fmt::format("top_k {} is more than the {} experts", w.moe.top_k, w.moe.experts));
  check_moe_layers(w);
  if (schedule == "interleaved" && w.vp == 1)
    root.fail("schedule", "the interleaved schedule needs virtual stages: set \"parallelism\": {\"vp\": 2 or more}");
  if (schedule == "1f1b" && w.vp > 1)
    root.fail("schedule", fmt::format("\"1f1b\" runs one model chunk per stage, but parallelism.vp is {}: leave "
                                      "\"schedule\" out or set \"interleaved\"", w.vp));

  if (w.explicit_head_dim > 0 && w.mla.enabled())
    throw ConfigError(doc.file, "/head_dim", "multi-latent attention states its head widths in \"mla\" (qk_head_dim, v_head_dim)");
  if (w.explicit_head_dim == 0 && w.hidden % w.heads != 0) {
    throw ConfigError(doc.file, "/heads", fmt::format("hidden {} does not divide into {} heads", w.hidden, w.heads));
  }
  if (w.heads % w.kv_heads != 0) {
    throw ConfigError(doc.file, "/kv_heads", fmt::format("{} query heads do not group over {} kv heads", w.heads, w.kv_heads));
  }
  if (w.global_batch % w.micro_batch != 0) {
    throw ConfigError(doc.file, "/global_batch",
                      fmt::format("global batch {} is not a multiple of the micro batch {}", w.global_batch, w.micro_batch));
  }
  return w;
}

namespace {

/// Megatron-Core's MoE constraints: experts divide over ep, the expert width over expert
/// TP, ep x expert TP ranks fold into each stage's tp x cp x dp ranks (the parallel
/// state's expert rank generator), and tensor parallelism comes with sequence parallelism
/// (megatron/core/transformer/moe/README.md: "When using MoE with expert parallelism and
/// tensor parallelism, sequence parallelism must be enabled"; perfcast models the token
/// flow of that case only, also at ep 1).
void check_expert_parallelism(const TransformerSpec& w) {
  const std::string at = "/parallelism/ep";
  if (w.moe.experts % w.ep != 0)
    throw ConfigError(w.file, at, fmt::format("{} experts do not divide over ep {}", w.moe.experts, w.ep));
  const int etp = w.expert_tp();
  if (w.stage_ranks() % (w.ep * etp) != 0)
    throw ConfigError(w.file, at, fmt::format("ep {} x expert_tp {} does not divide the {} ranks of a pipeline stage "
                                              "(tp x cp x dp)", w.ep, etp, w.stage_ranks()));
  if (w.expert_ffn() % etp != 0)
    throw ConfigError(w.file, "/moe/expert_tp", fmt::format("expert ffn_hidden {} does not divide over expert_tp {}",
                                                           w.expert_ffn(), etp));
  if (w.tp > 1 && !w.sequence_parallel)
    throw ConfigError(w.file, "/sequence_parallel", "MoE layers with tensor parallelism need sequence parallelism (Megatron-Core's "
                                                    "MoE README): set \"sequence_parallel\": true");
}

}  // namespace

namespace {
/// Megatron-Core's uneven pipeline split: the stated first / last stage layer counts, the
/// other stages an even share of the rest; with virtual stages every stage's layers divide
/// over its vp model chunks (get_num_layers_to_build).
void check_uneven_stages(const TransformerSpec& w, const std::string& at) {
  const std::string key = w.first_stage_layers > 0 ? "/first_stage_layers" : "/last_stage_layers";
  if (w.pp < 2) throw ConfigError(w.file, at + key, "uneven pipeline stages need pp >= 2");
  const auto [stages, rest] = even_stages_and_layers(w);
  if (rest < 0 || (stages == 0 && rest != 0) || (stages > 0 && (rest < stages || rest % stages != 0))) {
    throw ConfigError(w.file, at + key,
                      fmt::format("first {} and last {} stage layers leave {} of the {} layers for {} other stage(s): they "
                                  "must divide evenly, at least one layer each",
                                  w.first_stage_layers, w.last_stage_layers, rest, w.layers, stages));
  }
  if (w.vp > 1) {
    for (int s = 0; s < w.pp; ++s) {
      if (w.stage_layer_count(s) % w.vp == 0) continue;
      throw ConfigError(w.file, at + "/vp",
                        fmt::format("stage {} holds {} layers, which do not divide over vp {} model chunks (uneven stages with "
                                    "virtual stages split each stage's layers evenly over its chunks)",
                                    s, w.stage_layer_count(s), w.vp));
    }
  }
}
}  // namespace

void resolve_parallelism(TransformerSpec& w, int world) {
  if (w.mla.enabled()) check_mla(w);  // again: overrides and the parallelism search change cp and the overlaps
  const std::string at = "/parallelism";
  const int tp_pp = w.tp * w.cp * w.pp;
  const std::string cp_text = w.cp > 1 ? fmt::format(" x cp {}", w.cp) : "";
  if (w.dp == 0) {
    if (world % tp_pp != 0) {
      throw ConfigError(w.file, at, fmt::format("tp {}{} x pp {} = {} does not divide the system's {} GPUs (dp \"auto\")",
                                                w.tp, cp_text, w.pp, tp_pp, world));
    }
    w.dp = world / tp_pp;
  }
  if (tp_pp * w.dp != world) {
    throw ConfigError(w.file, at, fmt::format("tp {}{} x pp {} x dp {} = {} GPUs, but the system has {} (set dp to \"auto\" "
                                              "or change the parallelism)", w.tp, cp_text, w.pp, w.dp, tp_pp * w.dp, world));
  }
  if (w.cp > 1) {
    // Megatron-Core's load-balanced causal split: 2 x cp chunks per sequence, chunk i and
    // 2cp - 1 - i on CP rank i; its ring attention is Transformer Engine's.
    if (w.seq_len % (2 * w.cp) != 0)
      throw ConfigError(w.file, at + "/cp", fmt::format("seq_len {} does not split into 2 x cp = {} chunks", w.seq_len, 2 * w.cp));
    if (w.attention != AttentionImpl::kFlash)
      throw ConfigError(w.file, at + "/cp", "context parallelism runs Transformer Engine's fused attention: set \"attention\": \"flash\"");
  }
  if (w.heads % w.tp != 0 || w.kv_heads % w.tp != 0) {
    throw ConfigError(w.file, at + "/tp", fmt::format("{} heads ({} kv heads) do not divide over tp {}", w.heads, w.kv_heads, w.tp));
  }
  if (w.moe.shared_ffn % w.tp != 0) {
    throw ConfigError(w.file, "/moe/shared_expert_ffn_hidden",
                      fmt::format("shared expert width {} does not divide over tp {}", w.moe.shared_ffn, w.tp));
  }
  if (w.ffn_hidden % w.tp != 0) {
    throw ConfigError(w.file, at + "/tp", fmt::format("ffn_hidden {} does not divide over tp {}", w.ffn_hidden, w.tp));
  }
  if (w.account_for_embedding || w.account_for_loss) {
    check_accounted_split(w, at);
  } else if (w.uneven_stages()) {
    check_uneven_stages(w, at);
  } else if (w.layers % w.pp != 0) {
    throw ConfigError(w.file, at + "/pp", fmt::format("{} layers do not divide over pp {}", w.layers, w.pp));
  }
  if (w.vp > 1) {
    if (w.pp < 2) throw ConfigError(w.file, at + "/vp", fmt::format("virtual stages (vp {}) need pp >= 2", w.vp));
    if (!w.custom_pipeline_split() && w.layers % (w.pp * w.vp) != 0) {
      throw ConfigError(w.file, at + "/vp", fmt::format("{} layers do not divide over pp {} x vp {} model chunks", w.layers,
                                                        w.pp, w.vp));
    }
  }
  if (w.moe.enabled()) check_expert_parallelism(w);
  check_moe_layers(w);
  if (w.sequence_parallel && w.seq_len / w.cp * w.micro_batch % w.tp != 0) {
    throw ConfigError(w.file, "/sequence_parallel", fmt::format("seq_len x micro_batch does not divide over tp {}", w.tp));
  }
  if (w.global_batch % (w.micro_batch * w.dp) != 0) {
    throw ConfigError(w.file, "/global_batch", fmt::format("global batch {} is not a multiple of micro batch {} x dp {}",
                                                           w.global_batch, w.micro_batch, w.dp));
  }
  // Megatron's interleaved schedule runs micro-batches in groups of pp per model chunk
  // (schedules.py: "number of microbatches ... is not divisible by pipeline-model-parallel-size").
  if (w.vp > 1 && w.micro_batches() % w.pp != 0) {
    throw ConfigError(w.file, at + "/vp", fmt::format("the interleaved schedule needs the micro-batch count ({}) to be a "
                                                      "multiple of pp {}", w.micro_batches(), w.pp));
  }
}

}  // namespace perfcast
