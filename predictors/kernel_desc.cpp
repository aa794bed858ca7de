#include "predictors/kernel_desc.hpp"

#include <functional>

#include <fmt/format.h>

namespace perfcast {
namespace {

void mix(std::size_t& seed, std::size_t v) { seed ^= v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }
void mix_d(std::size_t& seed, double v) { mix(seed, std::hash<double>{}(v)); }

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace

std::string_view optimizer_name(EmbeddingOptimizer o) {
  switch (o) {
    case EmbeddingOptimizer::kSgd: return "sgd";
    case EmbeddingOptimizer::kRowwiseAdagrad: return "rowwise_adagrad";
    case EmbeddingOptimizer::kAdam: return "adam";
    case EmbeddingOptimizer::kAdagrad: return "adagrad";
    case EmbeddingOptimizer::kNone: return "none";
  }
  return "sgd";
}

EmbeddingOptimizer embedding_optimizer_from_name(std::string_view name) {
  for (const auto o : {EmbeddingOptimizer::kRowwiseAdagrad, EmbeddingOptimizer::kAdam, EmbeddingOptimizer::kAdagrad,
                       EmbeddingOptimizer::kNone})
    if (name == optimizer_name(o)) return o;
  return EmbeddingOptimizer::kSgd;
}

std::string_view storage_kernel_name(EmbeddingStorage s) {
  switch (s) {
    case EmbeddingStorage::kHbm: return "fused";
    case EmbeddingStorage::kHostUvm: return "fused_uvm";
    case EmbeddingStorage::kHostUvmCaching: return "fused_uvm_caching";
  }
  return "fused";
}

std::string_view gemm_impl_name(GemmImpl i) {
  switch (i) {
    case GemmImpl::kCublas: return "cublas";
    case GemmImpl::kDeepGemm: return "deepgemm";
    case GemmImpl::kTriton: return "triton";
  }
  return "cublas";
}

std::optional<GemmImpl> gemm_impl_from_name(std::string_view name) {
  for (const auto i : {GemmImpl::kCublas, GemmImpl::kDeepGemm, GemmImpl::kTriton})
    if (name == gemm_impl_name(i)) return i;
  return std::nullopt;
}

std::string_view attention_kernel_name(AttentionKernel i) {
  switch (i) {
    case AttentionKernel::kFlash2: return "flash2";
    case AttentionKernel::kFlash3: return "flash3";
    case AttentionKernel::kCudnn: return "cudnn";
    case AttentionKernel::kTriton: return "triton";
    case AttentionKernel::kTileLang: return "tilelang";
  }
  return "flash2";
}

std::optional<AttentionKernel> attention_kernel_from_name(std::string_view name) {
  for (const auto i : {AttentionKernel::kFlash2, AttentionKernel::kFlash3, AttentionKernel::kCudnn, AttentionKernel::kTriton,
                       AttentionKernel::kTileLang})
    if (name == attention_kernel_name(i)) return i;
  return std::nullopt;
}

std::string kernel_family(const KernelDesc& k) {
  return std::visit(Overloaded{
                        [](const GemmDesc&) -> std::string { return "gemm"; },
                        [](const EmbeddingDesc& e) -> std::string {
                          return e.pass == EmbeddingPass::kForward ? "embedding_forward" : "embedding_backward";
                        },
                        [](const ElementwiseDesc&) -> std::string { return "elementwise"; },
                        [](const MemcpyDesc&) -> std::string { return "memcpy"; },
                        [](const MeasuredKernelDesc&) -> std::string { return "measured"; },
                        [](const AttentionDesc& a) -> std::string {
                          return a.pass == AttentionPass::kForward ? "attention_forward" : "attention_backward";
                        },
                    },
                    k);
}

std::string kernel_label(const KernelDesc& k) {
  return std::visit(
      Overloaded{
          [](const GemmDesc& g) {
            const std::string type = std::string(dtype_name(g.dtype)) + (g.block_scaled ? " block-scaled" : "") +
                                     (g.impl != GemmImpl::kCublas ? " " + std::string(gemm_impl_name(g.impl)) : "");
            return g.batch > 1 ? fmt::format("bmm {}x{}x{}x{} {}", g.batch, g.m, g.n, g.k, type)
                               : fmt::format("gemm {}x{}x{} {}", g.m, g.n, g.k, type);
          },
          [](const EmbeddingDesc& e) {
            std::size_t host = 0;
            for (const auto& t : e.tables) host += t.storage != EmbeddingStorage::kHbm ? 1 : 0;
            return fmt::format("embedding_{} {} tables batch {}{}", e.pass == EmbeddingPass::kForward ? "fwd" : "bwd",
                               e.tables.size(), e.batch, host ? fmt::format(" ({} in host memory)", host) : std::string());
          },
          [](const ElementwiseDesc& e) {
            return fmt::format("{} {} elements{}", e.op, e.elements, e.thread_per_element ? ", a thread each" : "");
          },
          [](const MemcpyDesc& m) {
            const char* dir = m.kind == CopyKind::kHostToDevice   ? "H2D"
                              : m.kind == CopyKind::kDeviceToHost ? "D2H"
                                                                  : "D2D";
            return fmt::format("memcpy {} {}", dir, format_bytes(m.bytes));
          },
          [](const MeasuredKernelDesc& m) { return fmt::format("{} (measured {})", m.name, format_time(m.duration)); },
          [](const AttentionDesc& a) {
            const std::string v = a.value_dim() != a.head_dim ? fmt::format("/{}", a.value_dim()) : "";
            return fmt::format("flash_attention_{} {}x{}x{}x{}x{}{}{}{}{} {}", a.pass == AttentionPass::kForward ? "fwd" : "bwd",
                               a.batch, a.heads, a.seq_q, a.seq_kv, a.head_dim, v, a.causal ? " causal" : "",
                               a.window > 0 ? fmt::format(" window {}", a.window) : "",
                               a.impl != AttentionKernel::kFlash2 ? " " + std::string(attention_kernel_name(a.impl)) : "",
                               dtype_name(a.dtype));
          },
      },
      k);
}

std::size_t hash_value(const KernelDesc& k) {
  std::size_t seed = k.index();
  std::visit(Overloaded{
                 [&](const GemmDesc& g) {
                   for (auto v : {g.m, g.n, g.k, g.batch}) mix(seed, static_cast<std::size_t>(v));
                   mix(seed, static_cast<std::size_t>(g.dtype));
                   mix(seed, g.bias_epilogue);
                   mix(seed, g.block_scaled);
                   mix(seed, static_cast<std::size_t>(g.impl));
                   mix(seed, static_cast<std::size_t>(g.epilogue_inputs));
                 },
                 [&](const EmbeddingDesc& e) {
                   mix(seed, static_cast<std::size_t>(e.batch));
                   mix(seed, static_cast<std::size_t>(e.weight_dtype));
                   mix(seed, static_cast<std::size_t>(e.pass));
                   mix(seed, static_cast<std::size_t>(e.optimizer));
                   mix(seed, static_cast<std::size_t>(e.index_bytes));
                   mix_d(seed, e.host_to_device);
                   mix_d(seed, e.device_to_host);
                   mix(seed, static_cast<std::size_t>(e.output_dtype));
                   mix(seed, e.weighted);
                   mix(seed, e.fused_optimizer);
                   for (const auto& t : e.tables) {
                     mix(seed, static_cast<std::size_t>(t.rows));
                     mix(seed, static_cast<std::size_t>(t.dim));
                     mix_d(seed, t.pooling);
                     mix(seed, static_cast<std::size_t>(t.distribution.kind));
                     mix_d(seed, t.distribution.alpha);
                     mix_d(seed, t.distribution.hot_rows_fraction);
                     mix_d(seed, t.distribution.hot_access_fraction);
                     for (double r : t.distribution.reuse) mix_d(seed, r);
                     mix(seed, static_cast<std::size_t>(t.storage));
                     mix_d(seed, t.cache_rows);
                     mix(seed, static_cast<std::size_t>(t.sequence));
                   }
                 },
                 [&](const ElementwiseDesc& e) {
                   mix(seed, std::hash<std::string>{}(e.op));
                   mix(seed, static_cast<std::size_t>(e.elements));
                   mix_d(seed, e.flops_per_element);
                   mix_d(seed, e.bytes_per_element);
                   mix(seed, e.cold_l2);
                   if (e.thread_per_element) mix(seed, std::size_t{0x7e});  // absent from earlier keys
                 },
                 [&](const MemcpyDesc& m) {
                   mix_d(seed, m.bytes);
                   mix(seed, static_cast<std::size_t>(m.kind));
                 },
                 [&](const MeasuredKernelDesc& m) {
                   mix(seed, std::hash<std::string>{}(m.name));
                   mix_d(seed, m.duration);
                 },
                 [&](const AttentionDesc& a) {
                   for (auto v : {a.batch, a.heads, a.kv_heads, a.seq_q, a.seq_kv, a.head_dim, a.v_head_dim, a.window})
                     mix(seed, static_cast<std::size_t>(v));
                   mix(seed, static_cast<std::size_t>(a.impl));
                   mix(seed, a.causal);
                   mix(seed, static_cast<std::size_t>(a.dtype));
                   mix(seed, static_cast<std::size_t>(a.pass));
                 },
             },
             k);
  return seed;
}

}  // namespace perfcast
