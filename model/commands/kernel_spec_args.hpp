#pragma once
/// \file kernel_spec_args.hpp
/// Single kernels written on the command line as KEY=VALUE lists (`perfcast kernels --gemm
/// m=4096,n=4096,k=4096,dtype=bf16`), turned into kernel descriptors. Unknown keys, missing
/// required keys and bad values are ConfigError naming the option and the key.
///
/// Keys (defaults in brackets):
///   --gemm          m, n, k; batch [1] (or groups: equal groups of a grouped GEMM); dtype
///                   [bf16] (fp32, tf32, fp16, bf16, fp8); scaling [tensor] (tensor, block);
///                   impl [cublas] (cublas, deepgemm, triton); bias [0]
///   --attention     batch, heads, seq (or seq_q and seq_kv), head_dim; kv_heads [heads];
///                   head_dim_v [head_dim]; causal [0]; window [0: none]; pass [forward]
///                   (forward, backward, both); dtype [bf16]; impl [flash2] (flash2, flash3,
///                   cudnn, triton, tilelang)
///   --memory-bound  bytes (read + written, e.g. 64MiB); op [copy]; cold_l2 [0]; elements [bytes];
///                   thread_per_element [0] (1: one thread per element, needs elements)
///   --embedding     tables, rows, dim, batch; pooling [1]; distribution [uniform] (uniform,
///                   zipf:ALPHA); pass [forward] (forward, backward); optimizer [sgd] (sgd,
///                   rowwise_adagrad, adam, adagrad); dtype [fp32]; unpooled [0]; storage
///                   [hbm] (hbm, uvm)

#include <string>
#include <vector>

#include "predictors/kernel_desc.hpp"

namespace perfcast {

/// One kernel of the command line: its descriptors (attention pass=both: forward and
/// backward, predicted as one sum) and the text it was given as.
struct KernelSpecArg {
  std::string option;  ///< "--gemm", ...
  std::string text;
  std::vector<KernelDesc> kernels;
};

[[nodiscard]] KernelSpecArg parse_gemm_arg(const std::string& text);
[[nodiscard]] KernelSpecArg parse_attention_arg(const std::string& text);
[[nodiscard]] KernelSpecArg parse_memory_bound_arg(const std::string& text);
[[nodiscard]] KernelSpecArg parse_embedding_arg(const std::string& text);

}  // namespace perfcast
