#pragma once
/// \file device_dlrm_impl.hpp
/// Internal: the state of a DeviceDlrm (device_dlrm.hpp), shared by device_dlrm.cpp (the MLPs,
/// the single-GPU lookup, the step) and device_dlrm_rank.cpp (a multi-GPU rank's shard groups
/// and NCCL exchanges). CUDA builds only; not part of any interface.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "profiler/embedding_bag_layout.hpp"
#include "profiler/embedding_bag_types.hpp"
#include "profiler/kernels/embedding_bag.hpp"
#include "validation/device_dlrm.hpp"
#include "validation/device_support.hpp"
#include "validation/executor_kernels.hpp"
#include "validation/multi_gpu_layout.hpp"

namespace perfcast::validation {
namespace device_detail {

/// One MLP layer on the device: parameter and gradient views into the flat buffers, and its
/// three GEMMs (forward with epilogue, data gradient, weight gradient).
struct DeviceLayer {
  std::int64_t in = 0, out = 0;
  std::size_t offset = 0;  // element offset of the weights in the flat parameter buffer; bias follows
  std::size_t h_weight_at = 0, h_bias_at = 0;  // mixed precision: element offsets in the half copy (256 B aligned)
  bool relu = true;
  std::unique_ptr<LtGemm> fwd, dgrad, wgrad;
};

/// Rounds up to 256 bytes, the alignment cuBLASLt's heuristic assumes by default
/// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES) and cudaMalloc guarantees.
inline std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Where a shard of an embedding group comes from (to draw its weights as a slice of the table).
struct ShardOrigin {
  std::size_t table = 0;  ///< workload table
  std::int64_t row_offset = 0, col_offset = 0;
};

/// One embedding-bag launch: a set of tables (single GPU: all of them; a multi-GPU rank: its
/// pooled, row_wise or data-parallel shards) packed in one EmbeddingBagLayout whose batch is
/// the number of bags per shard, with its weights, optimizer state and place in the batch.
struct EmbeddingGroup {
  bool used = false;
  profiler::EmbeddingBagLayout layout;
  std::vector<ShardOrigin> origins;  ///< per layout table
  void* weights = nullptr;
  float* rowwise_state = nullptr;
  profiler::EmbeddingTableMeta* tables = nullptr;
  std::int64_t capacity = 0;         ///< indices
  std::size_t offsets_at = 0;        ///< byte offset of the offsets in the device batch buffer
  std::size_t indices_at = 0;        ///< byte offset of the indices in the device batch buffer
  float* out = nullptr;              ///< lookup output [bags, layout.total_dim]
  float* dout = nullptr;             ///< its gradient
  float* dense_grad = nullptr;       ///< data-parallel group: [total_weight_elements] fp32
};

/// A staged batch in pinned host memory: the fixed part (dense, labels, every group's
/// offsets) followed by the first used group's indices, then the other groups' indices.
struct Staged {
  std::unique_ptr<PinnedBuffer> host;
  std::array<std::int64_t, 3> num_indices{};
  std::array<std::size_t, 3> host_at{};  ///< byte offset of each group's indices in `host`
  std::size_t first_copy_bytes = 0;      ///< fixed part + the first used group's indices
};

}  // namespace device_detail

using device_detail::DeviceLayer;
using device_detail::EmbeddingGroup;
using device_detail::Staged;

struct DeviceDlrm::Impl {
  DlrmConfig cfg;
  DeviceDlrmOptions opt;
  std::int64_t B = 0, d = 0, W = 0, T = 0, nf = 0;  // local batch, bottom width, interaction width, tables, features
  std::int64_t total_dim = 0;                       // width of the pooled embeddings
  std::int64_t grad_denominator = 0;                // global batch
  profiler::WeightPrecision act = profiler::WeightPrecision::kFp32;  // activations and GEMM operands
  std::size_t act_bytes = 4;
  float loss_scale = 1.0f;                          // static loss scale (fp16 only), see kFp16LossScale
  cudaStream_t compute = nullptr, copy = nullptr, comm_stream = nullptr;
  cudaEvent_t ev_start = nullptr, ev_end = nullptr, ev_copied = nullptr, ev_to_comm = nullptr, ev_from_comm = nullptr;
  cublasLtHandle_t lt = nullptr;
  std::vector<DeviceBuffer> owned;  // every allocation, freed after the plans
  std::size_t total_bytes = 0;
  DeviceBuffer lt_workspace;
  // Dense parameters: flat [weights, bias] per layer, bottom then top.
  std::int64_t num_params = 0;
  float* params = nullptr;
  float* grads = nullptr;
  float* adam_m = nullptr;
  float* adam_v = nullptr;
  std::int64_t adam_step = 0;
  // Mixed precision: the half copy of the parameters the GEMMs read, every weight and bias at
  // a 256-byte boundary, refreshed from `params` by one launch over `h_segments` (device).
  void* params_h = nullptr;
  kernels::ConvertSegment* h_segments = nullptr;
  int h_segment_count = 0;
  std::int64_t h_max_segment = 0;
  std::vector<DeviceLayer> bottom, top;
  // Activations (act elements): [0] = input, [l+1] = output of layer l. bottom_act[0] is the
  // fp32 dense input in the batch buffer, or its half copy in mixed precision.
  std::vector<void*> bottom_act, top_act;
  std::vector<void*> dbottom_act, dtop_act;   // gradients of the same
  float* pooled = nullptr;                    // [B, total_dim] fp32
  float* dpooled = nullptr;
  void* features = nullptr;                   // dot: [B, nf, d] act
  void* dfeatures = nullptr;
  void* z = nullptr;                          // dot: [B, nf, nf] act
  void* s = nullptr;                          // dot: symmetric dZ
  std::unique_ptr<LtGemm> z_gemm, df_gemm;
  // Embeddings: group 0 alone on one GPU; pooled, row_wise, data_parallel on a rank.
  std::array<EmbeddingGroup, 3> groups;
  void* emb_workspace = nullptr;
  std::size_t emb_workspace_bytes = 0;
  // Multi-GPU rank only.
  const MultiGpuLayout* ml = nullptr;
  const NcclComm* comm = nullptr;
  int rank = 0;
  float* exch = nullptr;   // [B * total_dim]: all-to-all receive, reduce-scatter output, local data-parallel lookup
  float* dexch = nullptr;  // the same layout, gradients
  std::int64_t* map_base = nullptr;   // column map pooled <-> exch (device, [total_dim])
  std::int32_t* map_stride = nullptr;
  std::vector<std::int64_t> a2a_send_counts, a2a_send_displs, a2a_recv_counts, a2a_recv_displs;  // forward, floats
  bool any_pooled = false;            // some rank holds table_wise/column_wise shards
  std::int64_t rs_at = 0, dp_at = 0;  // float offsets of the row-wise and data-parallel regions of exch
  std::int64_t row_wise_dims = 0;
  std::vector<int> bucket_closed_by;  // per layer (bottom 0.., then top): index of the bucket it completes, or -1
  // Batch on the device and loss.
  std::size_t dense_at = 0, labels_at = 0, fixed_bytes = 0;
  unsigned char* batch_dev = nullptr;
  float* loss_dev = nullptr;
  void* dlogits = nullptr;  // act
  std::unique_ptr<PinnedBuffer> loss_host;
  std::vector<Staged> staged;

  [[nodiscard]] bool sharded() const { return ml != nullptr; }
  [[nodiscard]] bool mixed() const { return act != profiler::WeightPrecision::kFp32; }
  float* alloc_f(std::int64_t n) { return static_cast<float*>(alloc(sz(n) * sizeof(float))); }
  void* alloc_act(std::int64_t n) { return alloc(sz(n) * act_bytes); }
  void* alloc(std::size_t bytes) {
    owned.emplace_back(bytes);
    total_bytes += bytes;
    return owned.back().get();
  }

  ~Impl() {
    // Plans before the handle; buffers (owned) after the stream work is done.
    for (auto st : {compute, copy, comm_stream}) {
      if (st) cudaStreamSynchronize(st);
    }
    bottom.clear();
    top.clear();
    z_gemm.reset();
    df_gemm.reset();
    if (lt) cublasLtDestroy(lt);
    for (auto e : {ev_start, ev_end, ev_copied, ev_to_comm, ev_from_comm}) {
      if (e) cudaEventDestroy(e);
    }
    for (auto st : {compute, copy, comm_stream}) {
      if (st) cudaStreamDestroy(st);
    }
  }

  void init_common(const DlrmModel& m, const DeviceDlrmOptions& options);
  void plan_groups_single(const DlrmModel& m);
  void plan_groups_sharded(const DeviceDlrmShard& shard);
  void allocate_batch_and_groups();
  void build_layers(const DlrmModel& m, float* dense_input);
  void upload(const DlrmModel& m);
  int stage(const float* dense, const float* labels, const std::array<const GroupInput*, 3>& inputs);
  void copy_batch(const Staged& st);
  void forward_backward_update(const Staged& st);
  void layer_backward(const DeviceLayer& l, void* y, void* dy, int layer_index, void* ws);
  void refresh_half_params();
  // Multi-GPU rank only (device_dlrm_rank.cpp).
  void ddp_bucket_done(int layer_index);
  void exchange_forward();
  void exchange_backward(const Staged& st, const std::array<profiler::kernels::EmbeddingBagDeviceBatch, 3>& eb,
                         const profiler::OptimizerConfig& eo, void* ws);
  void to_comm();
  void from_comm();
  [[nodiscard]] profiler::kernels::EmbeddingBagDeviceBatch device_batch(int g, const Staged& st,
                                                               profiler::WeightPrecision precision) const;
};

}  // namespace perfcast::validation
