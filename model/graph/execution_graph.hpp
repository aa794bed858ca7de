#pragma once
/// \file execution_graph.hpp
/// One training iteration per rank, in host order: value-type ops that carry their
/// kernels (or one collective), the stream they run on and their data dependencies.
///
/// Contract: `deps` point to earlier ops of the same rank and iteration, `prev_deps` to any
/// ops of the same rank's previous iteration; every rank of a group issues that group's
/// collectives in the same order.

#include <optional>
#include <string>
#include <vector>

#include "predictors/kernel_desc.hpp"
#include "topology/collective.hpp"

namespace perfcast {

/// GPU streams of one rank. The host thread is not a stream; it is tracked separately.
enum class Stream { kCompute = 0, kComm = 1, kCopy = 2 };
inline constexpr int kStreamCount = 3;
[[nodiscard]] std::string_view stream_name(Stream s);

enum class Phase { kInput, kForward, kBackward, kOptimizer };
[[nodiscard]] std::string_view phase_name(Phase p);

/// A collective as all ranks of its group see it; stored once per graph (all-to-allv
/// byte matrices grow as ranks squared).
struct GraphCollective {
  CollectiveDesc desc;
  int group = 0;  ///< index into ExecutionGraph::groups
};

struct Op {
  std::string name;   ///< e.g. "bottom_mlp.0", "output_dist", "allreduce.bucket1"
  Phase phase = Phase::kForward;
  Stream stream = Stream::kCompute;
  std::vector<KernelDesc> kernels;            ///< run back to back on `stream`
  std::optional<int> collective;              ///< instead of kernels: index into ExecutionGraph::collectives
  std::vector<int> deps;                      ///< ops (same rank) whose outputs this op reads
  bool host_waits = false;                    ///< the host blocks until this op ends
  /// A forward op re-run in the backward (activation recomputation): phase kBackward, but a
  /// Python module call, so it pays HostSpec::op_overhead, not backward_op_overhead.
  bool recompute = false;
  /// Ops of the previous iteration whose outputs this op reads: inputs a training pipeline
  /// prepared one iteration ahead (TorchRec's sparse_dist). In the first iteration, none.
  std::vector<int> prev_deps{};
  /// One part of a batched group of point-to-point transfers (torch.distributed's
  /// batch_isend_irecv: NCCL runs the sends and receives of a group together): a collective
  /// that neither waits for its stream's earlier work nor holds up the stream's later work,
  /// so the parts of one call, and calls of ranks around a pipeline ring, cannot block each
  /// other. Collectives only.
  bool concurrent = false;
  /// A later part of the call the previous op began: no host op overhead of its own (the
  /// launch overhead stays).
  bool same_call = false;
  /// The first op of a mixture-of-experts layer forward (its router): the host also pays
  /// HostSpec::moe_layer_overhead before it.
  bool moe_layer_start = false;
  /// A linear layer's forward under FP8 (its kernels begin with the input's FP8 cast): the
  /// host also pays HostSpec::fp8_module_overhead for it.
  bool fp8_module = false;
  /// Part of a CUDA graph the host replays as a whole: no per-op and no per-launch host cost
  /// of its own (the graph's launch op pays HostSpec::graph_launch_overhead once).
  bool captured = false;
  /// The cudaGraphLaunch of the captured ops (an op without GPU work of its own): its host
  /// cost is HostSpec::graph_launch_overhead.
  bool graph_launch = false;
  /// Host work that scales with the job, on top of the op's per-op cost: tables whose
  /// inputs or outputs the framework handles one by one for this op (TorchRec's
  /// KeyedJaggedTensor splits and permutes), at HostSpec::table_overhead each, and samples it
  /// handles on the training thread, at HostSpec::sample_overhead each.
  int host_tables = 0;
  double host_samples = 0;
  /// A collective op (same rank, comm stream) that runs beside this op's kernels and keeps
  /// `sm_sharing_sms` SMs busy while it runs (Transformer Engine's userbuffers kernels of a
  /// TP communication overlap): the kernels lose that share of the GPU's SMs for the
  /// shorter of the two durations (Annotator::annotate). -1: none.
  int sm_sharing_op = -1;
  int sm_sharing_sms = 0;
};

struct RankProgram {
  std::vector<Op> ops;
};

struct ExecutionGraph {
  std::vector<RankProgram> ranks;
  std::vector<RankGroup> groups;
  std::vector<GraphCollective> collectives;
  /// Symmetric simulation: empty when every rank is simulated; else one entry per rank,
  /// the rank whose program and timeline stand for it (itself for a simulated rank). A
  /// mirrored rank has an empty program; builders mirror only ranks whose program differs
  /// from their representative's by group membership alone, so every collective's members
  /// arrive together and the representative's timeline is theirs (see docs/transformers.md).
  std::vector<int> mirror_of;

  [[nodiscard]] bool simulated(int rank) const { return mirror_of.empty() || mirror_of[static_cast<std::size_t>(rank)] == rank; }
  [[nodiscard]] int representative(int rank) const { return mirror_of.empty() ? rank : mirror_of[static_cast<std::size_t>(rank)]; }
};

}  // namespace perfcast
