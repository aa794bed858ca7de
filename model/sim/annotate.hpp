#pragma once
/// \file annotate.hpp
/// Attaches predicted durations to an execution graph: kernel predictors per kernel,
/// the collective model per collective. Kernel estimates are cached by descriptor, so
/// re-annotating a graph that differs in a few ops (sharding search) is cheap.

#include <optional>
#include <unordered_map>
#include <vector>

#include "model/graph/execution_graph.hpp"
#include "predictors/estimate.hpp"
#include "predictors/kernel_calibration.hpp"
#include "topology/collective.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct OpTiming {
  std::vector<Estimate> kernels;  ///< one per Op::kernels entry
  /// Measured host time of this op before its last launch returns, s (trace replay sets
  /// it from the trace); replaces HostSpec::op_overhead when set. Launch overheads are
  /// still added (replay uses a HostSpec with zero overheads).
  std::optional<Seconds> host_time;
};

struct TimedGraph {
  const ExecutionGraph* graph = nullptr;
  std::vector<std::vector<OpTiming>> ops;             ///< [rank][op]
  std::vector<CollectiveEstimate> collectives;        ///< per ExecutionGraph::collectives
  /// [rank][op]: the factor (>= 1) by which NCCL kernels running beside the op stretch its
  /// kernels (add_nccl_sm_sharing); empty, or a rank's row empty, where nothing does.
  std::vector<std::vector<double>> kernel_stretch;
  /// The stretch of rank r's op i (1 when none).
  [[nodiscard]] double stretch(std::size_t r, std::size_t i) const {
    return r < kernel_stretch.size() && i < kernel_stretch[r].size() ? kernel_stretch[r][i] : 1.0;
  }
};

/// NCCL kernels hold SMs (CollectiveEstimate::sms: one CTA per channel) while they run, so the
/// compute kernels that run beside them progress on the other SMs: a kernel overlapped for o
/// seconds by a collective holding n of the GPU's S SMs takes o x n / (S - n) longer. Where
/// they overlap comes from each rank's program alone, replayed without the host: compute ops
/// back to back on their stream, each after the ops it reads; collectives on theirs in order,
/// each after the ops it reads (other ranks' arrival is not waited for). Transformer Engine's
/// userbuffers collectives (some op's sm_sharing_op) are counted by Annotator already, and
/// replayed kernels (MeasuredKernelDesc) keep their measured times. Sets t.kernel_stretch.
void add_nccl_sm_sharing(const ExecutionGraph& g, TimedGraph& t, int sm_count);

class Annotator {
 public:
  Annotator(const SystemSpec& system, const CollectiveModel& comm) : system_(&system), comm_(&comm) {}
  /// Kernel calibration of the system's GPU (may be null: spec-derived predictors). Must
  /// outlive the annotator; set before the first annotate().
  void set_calibration(const KernelCalibration* calibration) { calibration_ = calibration; }
  /// The returned TimedGraph points at `g`, which must outlive it.
  [[nodiscard]] TimedGraph annotate(const ExecutionGraph& g);
  [[nodiscard]] std::size_t cache_size() const { return cache_.size(); }

 private:
  /// Op::sm_sharing_op: lengthens the kernels of ops that share their SMs with a collective
  /// beside them (after the kernels and collectives are estimated).
  void add_sm_sharing(const ExecutionGraph& g, TimedGraph& t) const;
  const SystemSpec* system_;
  const CollectiveModel* comm_;
  const KernelCalibration* calibration_ = nullptr;
  std::unordered_map<KernelDesc, Estimate, KernelDescHash> cache_;
};

}  // namespace perfcast
