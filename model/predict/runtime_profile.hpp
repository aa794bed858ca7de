#pragma once
/// \file runtime_profile.hpp
/// The software stack a workload runs on (configs/runtimes/<name>.json, schema
/// "perfcast.runtime"): host costs per op, per backward op, per launch and per collective
/// that belong to the framework, not to the GPU system, with the fit they came from. A
/// workload names its runtime ("runtime": "megatron_deepspeed"); without one, Transformers
/// use megatron_deepspeed and other workloads pytorch_eager; `--set runtime=NAME` overrides.
/// Values a profile sets replace the system file's `host` values; the others stay. A fitted
/// profile names the CPU it was measured on and that CPU's host speed (CpuSpec::host_speed);
/// its values are scaled to the system's CPU by measured speed / system speed.

#include <filesystem>
#include <optional>
#include <vector>
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "model/graph/transformer_spec.hpp"
#include "model/graph/workload_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

/// A runtime profile's DLRM settings ("dlrm"): how the stack runs a DLRM step. Each is
/// optional (unset: the workload's value or DlrmStack's default), and each needs a source:
/// an entry "dlrm.KEY" (or "dlrm.fusion" / "dlrm" for several) in the profile's "sources".
///  fusion.dcn_cross, fusion.mlp_backward: "none" | "pointwise" | "gemm_epilogue";
///  fusion.interaction: "none" | "fused"; embedding_optimizer: "fused" | "separate";
///  pipeline: "none" | "sparse_dist" | "semi_sync"; reader: "blocking" | "overlapped";
///  launch: "eager" | "cuda_graphs"; dense: "eager" | "compiled"; mlp_dtype: fp32 | tf32 | bf16 | fp16;
///  embedding_dtype: fp32 | fp16 | bf16 (the tables' weights); embedding_output: fp32 | fp16 |
///  bf16 (the pooled outputs and their gradients where the plan states no output_dtype);
///  embedding_update: sgd | rowwise_adagrad | adagrad | adam (the optimizer the stack runs on
///  the tables, replacing the workload's); weight_gradients: "in_layer" | "async" (see
///  DlrmStack::async_weight_gradients); gradient_allreduce: "buckets" | "grouped" and
///  gradient_dtype: fp32 | fp16 | bf16 (DlrmStack::grouped_allreduce, gradient_dtype);
///  planner: "round_robin" | "hugectr_auto" (the plan used when none is given).
struct RuntimeDlrmStack {
  std::optional<Fusion> dcn_cross, mlp_backward;
  std::optional<bool> fused_interaction, fused_embedding_optimizer, overlapped_reader, cuda_graphs, compiled_dense,
      async_weight_gradients, grouped_allreduce, hugectr_planner;
  std::optional<TrainPipeline> pipeline;
  std::optional<DType> mlp_dtype, embedding_dtype, embedding_output, gradient_dtype;
  std::optional<EmbeddingOptimizer> embedding_update;
};

/// What a profile was fitted on (its "fit.regime"): predictions outside it are
/// extrapolations, and say so instead of quoting the fit's held-out error.
struct FitRegime {
  std::vector<std::string> gpus;  ///< GPU names of the fit's systems (GpuSpec::name)
  int min_gpus = 0, max_gpus = 0;  ///< GPUs per job, inclusive
  std::int64_t min_batch = 0, max_batch = 0;  ///< global batch (samples), inclusive
  std::string workload;  ///< "dlrm" or "transformer"
  [[nodiscard]] bool empty() const { return workload.empty(); }
};

/// One rule of a profile's "attention_kernel": the fused-attention kernel the stack runs on
/// GPUs of compute capability `min_compute_capability` or more (0: on any GPU).
struct AttentionKernelRule {
  double min_compute_capability = 0;
  AttentionKernel kernel = AttentionKernel::kFlash2;
};
struct RuntimeProfile {
  std::string name;  ///< file stem, e.g. "megatron_deepspeed"
  std::string file;
  std::optional<Seconds> op_overhead, backward_op_overhead, launch_overhead, collective_launch_overhead, moe_layer_overhead,
      fp8_module_overhead;
  /// Host costs that scale with the job (HostSpec::table_overhead, sample_overhead) and the
  /// host cost of one CUDA graph replay.
  std::optional<Seconds> table_overhead, sample_overhead, graph_launch_overhead;
  RuntimeDlrmStack dlrm;  ///< the stack's DLRM settings ("dlrm")
  FitRegime regime;       ///< fit.regime (empty: not stated)
  /// Set by predict: what of the prediction lies outside `regime` ("": inside, or no regime).
  std::string outside_fit;
  /// "pipeline_transfers": "host_blocking" (true: the host waits for every pipeline
  /// transfer and synchronizes the device, Megatron-DeepSpeed) or "stream_ordered" (false:
  /// only the compute stream waits for the transfer). Unset: the workload's default (blocking).
  std::optional<bool> pipeline_host_blocking;
  /// "attention_kernel": a list of {"min_compute_capability", "kernel"}, the first whose
  /// minimum the GPU meets applying to Transformers whose workload names no attention_kernel
  /// (e.g. Transformer Engine's choice: cuDNN's fused attention on 9.0+, flash-attn before).
  std::vector<AttentionKernelRule> attention_kernels;
  std::string measured_on;  ///< what the fit used ("" : not fitted)
  double heldout_error = -1;  ///< held-out geomean |error| of the fit; < 0: none
  std::string fit_cpu;        ///< the CPU of the fit ("" : not stated)
  double fit_host_speed = 0;  ///< its CpuSpec::host_speed; 0: not stated (no scaling)
  /// Set by apply_runtime: the factor the profile's host values were multiplied by (1 when
  /// not scaled) and why.
  double host_scale = 1;
  std::string host_scale_basis;
  [[nodiscard]] bool fitted() const { return heldout_error >= 0; }
  /// The kernel of the first rule a GPU of compute capability `cc` meets (0: not stated,
  /// which meets only rules without a minimum); nullopt when none applies.
  [[nodiscard]] std::optional<AttentionKernel> attention_kernel_for(double cc) const;
};

/// Removes "runtime" from the workload document (the workload parsers do not know it) and
/// returns it; nullopt when absent. Throws ConfigError when it is not a string.
[[nodiscard]] std::optional<std::string> take_runtime_name(JsonDocument& workload_doc);

/// Default runtime for a workload kind: "megatron_deepspeed" for Transformers, else "pytorch_eager".
[[nodiscard]] std::string default_runtime(bool transformer);

/// True when `name` can name a runtime profile (configs/runtimes/NAME.json): non-empty,
/// letters, digits, '_' and '-' only.
[[nodiscard]] bool is_runtime_name(const std::string& name);

/// True when `name` names a profile by its file (it holds a '/' or ends in ".json").
[[nodiscard]] bool is_runtime_path(const std::string& name);

/// Where a runtime profile named NAME is looked for, in order: beside the workload's folder
/// (<workload dir>/../runtimes/), beside the system's (<system dir>/../runtimes/), and this
/// build's own configs/runtimes/, so that a workload outside configs/ still finds the shipped
/// profiles.
[[nodiscard]] std::vector<std::filesystem::path> runtime_search_dirs(const std::string& workload_file,
                                                                     const std::string& system_file = "");

/// Reads the profile `name`: a file when `name` is a path (is_runtime_path), else NAME.json
/// in the first of runtime_search_dirs that has it. Returns nullopt when the file is absent
/// and `required` is false (an implicit default); throws ConfigError when absent and
/// required (naming every folder looked in), or malformed.
[[nodiscard]] std::optional<RuntimeProfile> load_runtime_profile(const std::string& name, const std::string& workload_file,
                                                                 bool required, const std::string& system_file = "");

/// Applies the profile's DLRM settings to `w` (its stack, and the pipeline and precisions it
/// sets, which replace the workload's). Returns one note per workload value replaced, e.g.
/// "mlp_dtype fp16 (the workload says fp32)".
std::vector<std::string> apply_runtime_stack(DlrmSpec& w, const RuntimeProfile& runtime);
/// Applies the profile's Transformer settings to `w` on `gpu`: the attention kernel of its
/// rules where the workload names none. Returns what it set, e.g. "attention_kernel cudnn
/// (compute capability 9.0)", or "" when nothing.
std::string apply_runtime_transformer(TransformerSpec& w, const RuntimeProfile& runtime, const GpuSpec& gpu);

/// "" when a prediction of `workload` ("dlrm" / "transformer") with `gpus` GPUs of `gpu`
/// and global batch `batch` is inside the profile's fit regime (or it states none), else
/// what is outside, e.g. "8 GPUs (fitted on 1-8)".
[[nodiscard]] std::string outside_fit_regime(const RuntimeProfile& runtime, const std::string& workload, const std::string& gpu,
                                             int gpus, std::int64_t batch);

/// Host-cost overrides of the profile itself (`--set runtime.host.KEY=VALUE`, on the fit's
/// CPU like the profile's own values) read from `overrides` ({"op_overhead": "20us", ...}).
void override_runtime_host(RuntimeProfile& runtime, const JsonObject& overrides);

/// Puts the profile's host values into `system.host`, scaled to the system's CPU
/// (fit_host_speed / system.cpu.host_speed when both are known); records the factor.
void apply_runtime(SystemSpec& system, RuntimeProfile& runtime);

}  // namespace perfcast
