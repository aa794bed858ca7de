#pragma once
/// \file transformer_builder.hpp
/// Turns a Transformer workload (parallelism resolved) into one training iteration per
/// rank, Megatron-LM style (docs: README "Transformers").
///
/// Ranks are numbered as Megatron does: tp fastest, then dp, then pp
/// (rank = tp_i + tp x (dp_i + dp x pp_i)). Per rank, in host order, the 1F1B schedule of
/// forward_backward_pipelining_without_interleaving: warmup forwards (pp - stage - 1, at
/// most the micro-batch count), steady forward / send_forward_recv_backward / backward /
/// send_backward_recv_forward pairs, cooldown backwards. Point-to-point transfers are
/// 2-rank all-to-allv collectives on the group {stage s, stage s+1}, so the k-th transfer
/// of both sides matches. Then the tied-embedding gradient all-reduce between the first
/// and last stage (pp > 1), the data-parallel gradient all-reduce (or reduce-scatter +
/// all-gather with the distributed optimizer) and the Adam step over the rank's parameters.
///
/// Every op depends on the op before it: Megatron's TP collectives and pipeline transfers
/// block the compute stream; only the host runs ahead.

#include "model/graph/execution_graph.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/graph/transformer_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

/// `w` must have its parallelism resolved (resolve_parallelism) for `world` ranks.
[[nodiscard]] ExecutionGraph build_transformer_graph(const TransformerSpec& w, int world);

/// Parameters held by one rank of pipeline stage `stage` (its TP shard of the stage's
/// layers, plus the embedding on the first and the LM head on the last stage).
[[nodiscard]] double transformer_rank_parameters(const TransformerSpec& w, int stage);
/// Parameters of Transformer layer `layer` (0-based, whole model) on one TP rank (QKV,
/// attention output, MLP, norms, biases; an MoE layer has the router, the rank's experts,
/// transformer_layer_expert_parameters, and its share of the shared experts).
[[nodiscard]] double transformer_layer_parameters(const TransformerSpec& w, std::int64_t layer);
/// The expert parameters among them (local experts / expert TP); 0 for dense MLPs. They
/// are reduced and sharded over the expert data-parallel ranks, the rest over dp x cp.
[[nodiscard]] double transformer_layer_expert_parameters(const TransformerSpec& w, std::int64_t layer);
/// The layers pipeline stage `stage` holds, in model order (all its virtual chunks).
[[nodiscard]] std::vector<std::int64_t> transformer_stage_layers(const TransformerSpec& w, int stage);
/// Sums of the two over the stage's layers (one rank's share).
[[nodiscard]] double transformer_stage_layer_parameters(const TransformerSpec& w, int stage);
[[nodiscard]] double transformer_stage_expert_parameters(const TransformerSpec& w, int stage);

/// First-order device memory per rank, as Megatron-Core and Transformer Engine allocate it:
/// weights (bf16; FP8 copies under FP8, or FP8 weights alone with fp8_param_gather), the
/// gradient buffer in grad_reduce_dtype, Adam states (fp32 master, m, v; sharded over dp with
/// the distributed optimizer), activations kept for the backward of the in-flight
/// micro-batches (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
/// Transformer Models", table 2: s*b*h*(34 + 5*a*s/h) bytes per layer at 2-byte activations,
/// generalised to the model's widths, GQA, activation and dropout, with the TP /
/// sequence-parallel / selective / full-recompute variants), and the framework's reserve
/// (MemoryOptions::framework_reserve plus fragmentation_share of HBM). Reported in
/// RankMemory::dense, ::activations and ::reserved.
[[nodiscard]] std::vector<RankMemory> estimate_transformer_memory(const TransformerSpec& w, const SystemSpec& s,
                                                                  const MemoryOptions& options = {});

}  // namespace perfcast
