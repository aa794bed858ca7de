#pragma once
/// \file parallelism_space.hpp
/// The space `perfcast plan` searches for a Transformer on a given number of GPUs:
/// tensor (TP) x pipeline (PP) x data (DP) parallel sizes, micro-batch size, activation
/// recomputation and the distributed optimizer, screened before any simulation with the
/// shape rules of the workload (heads, layers and batch must divide) and the memory model
/// (model/graph/transformer_builder.hpp, estimate_transformer_memory).

#include <cstdint>
#include <string>
#include <vector>

#include "model/graph/transformer_spec.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

/// One point of the space. Sequence parallelism is on exactly when tp > 1 (as in
/// Megatron-LM's recipes: it only replaces the TP all-reduce by reduce-scatter/all-gather
/// and splits norm/dropout activations).
struct ParallelismChoice {
  int tp = 1, pp = 1, dp = 1;
  int cp = 1;  ///< context parallelism
  int vp = 1;  ///< virtual pipeline stages per rank (the interleaved schedule when > 1)
  int ep = 1;  ///< expert parallelism (MoE workloads only)
  /// Expert tensor parallelism (MoE workloads: moe.expert_tp, Megatron-Core's parallel
  /// folding); 0: the choice's tp.
  int etp = 0;
  /// The expert TP in effect: etp, or tp when 0.
  [[nodiscard]] int expert_tp() const { return etp > 0 ? etp : tp; }
  std::int64_t micro_batch = 1;
  Recompute recompute = Recompute::kNone;
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;  ///< Megatron's --overlap-grad-reduce (dp > 1 only)
  bool tp_comm_overlap = false;      ///< Transformer Engine's TP communication overlap (tp > 1 only)
  /// The workload states uneven first / last pipeline stages: the choice splits its layers
  /// evenly instead (the space is even splits), and its overrides and label say so.
  bool even_split_of_uneven = false;

  [[nodiscard]] bool sequence_parallel() const { return tp > 1; }
  bool operator==(const ParallelismChoice&) const = default;
  /// The `--set` lines that give a workload this choice ("workload.parallelism.tp=4", ...).
  [[nodiscard]] std::vector<std::string> overrides() const;
  /// "tp 4 pp 2 dp 2, micro-batch 1, recompute none, distributed optimizer, overlap grad
  /// reduce, TP comm overlap"
  [[nodiscard]] std::string label() const;
};

[[nodiscard]] const char* recompute_name(Recompute r);

struct SpaceOptions {
  std::vector<std::int64_t> micro_batches{1, 2, 4, 8};
  std::vector<Recompute> recomputes{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  std::vector<bool> distributed_optimizer{false, true};  ///< `true` only where dp > 1
  /// Overlaps, which change no memory: `true` only where dp > 1 (gradient reduction) and
  /// tp > 1 (TP communication; needs Transformer Engine, as Megatron-Core runs it).
  std::vector<bool> overlap_grad_reduce{false, true};
  std::vector<bool> tp_comm_overlap{false, true};
  /// Context-parallel sizes (each needs seq_len divisible by 2 cp and flash attention) and
  /// virtual pipeline stages (only where pp > 1 and the layers and micro-batches divide).
  /// Empty (the default): the workload's own cp and vp only; `perfcast plan --cp 1,2
  /// --vp 1,2` searches them.
  std::vector<int> context_parallel{};
  std::vector<int> virtual_stages{};
  /// Expert-parallel sizes (MoE workloads; each must divide the experts, and ep x expert TP
  /// the ranks of a stage). Empty: the workload's own ep.
  std::vector<int> expert_parallel{};
  /// Expert tensor-parallel sizes (MoE workloads; Megatron-Core's parallel folding: the
  /// experts' TP apart from the attention's, ep x expert TP dividing the ranks of a stage).
  /// Empty: the workload's own moe.expert_tp.
  std::vector<int> expert_tensor_parallel{};
  /// Largest TP size. 0: the GPUs of one node (TP across nodes is not searched: its
  /// all-reduces per layer would cross the network).
  int max_tp = 0;
};

/// Refuses (ConfigError naming the option) a space whose values are out of range, before
/// anything divides by them: micro-batch sizes in [1, 2^20], cp in [1, 1024], vp in [1, 64],
/// ep and expert TP in [1, 4096], max_tp 0 (one node) or [1, 2^20], at most kMaxSpaceValues
/// values per list.
/// The command line and the Python API pass through it alike.
void validate_space_options(const SpaceOptions& options);
inline constexpr std::size_t kMaxSpaceValues = 64;

/// A choice after screening: `rejected` is empty for a candidate to simulate, else why
/// it was not ("does not fit: ...", "does not divide: ...", "dominated: ...").
struct ScreenedChoice {
  ParallelismChoice choice;
  double max_memory_bytes = 0;  ///< largest per-rank estimate (0 when the shape does not divide)
  double capacity_bytes = 0;
  std::string rejected;
};

/// Every choice for `w` on `s` (all s.world_size() GPUs), in a fixed order (tp, cp, pp, vp, ep, expert TP,
/// micro-batch, distributed optimizer, overlaps, recompute ascending). Shapes that do not divide and
/// choices whose memory estimate exceeds the GPU's memory are rejected (validate_space_options
/// first); of the recompute
/// settings that fit for one shape, only the lightest is kept (heavier ones recompute the
/// same forward work again and change nothing else, so they cannot be faster).
[[nodiscard]] std::vector<ScreenedChoice> screen_parallelism_space(const TransformerSpec& w, const SystemSpec& s,
                                                                   const SpaceOptions& options = {});

}  // namespace perfcast
