#include "validation/device_dlrm.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "profiler/cuda_check.hpp"
#include "profiler/device_info.hpp"
#include "profiler/kernels/embedding_bag.hpp"
#include "validation/counter_rng.hpp"
#include "validation/device_dlrm_impl.hpp"
#include "validation/device_support.hpp"
#include "validation/executor_kernels.hpp"
#include "validation/multi_gpu_layout.hpp"

namespace perfcast::validation {

void DeviceDlrm::Impl::build_layers(const DlrmModel& m, float* dense_input) {
  const bool tf32 = opt.tf32;
  act = opt.mlp_precision;
  act_bytes = static_cast<std::size_t>(profiler::weight_bytes(act));
  loss_scale = act == profiler::WeightPrecision::kFp16 ? kFp16LossScale : 1.0f;
  std::size_t off = 0;
  const auto add_layers = [&](const std::vector<DenseLayer>& src, std::vector<DeviceLayer>& dst, bool last_linear) {
    for (std::size_t l = 0; l < src.size(); ++l) {
      DeviceLayer dl;
      dl.in = src[l].in;
      dl.out = src[l].out;
      dl.offset = off;
      dl.relu = !(last_linear && l + 1 == src.size());
      off += sz(dl.in * dl.out + dl.out);
      dst.push_back(std::move(dl));
    }
  };
  add_layers(m.bottom, bottom, false);
  add_layers(m.top, top, true);
  num_params = static_cast<std::int64_t>(off);
  params = alloc_f(num_params);
  grads = alloc_f(num_params);
  if (cfg.dense_optimizer == DenseOptimizer::kAdam) {
    adam_m = alloc_f(num_params);
    adam_v = alloc_f(num_params);
  }
  if (mixed()) {
    // The half copy: each weight matrix and bias at a 256-byte boundary (cuBLASLt's bias
    // and operand pointers), one conversion segment each.
    const std::size_t align = 256 / act_bytes;
    const auto round_up = [&](std::size_t v) { return (v + align - 1) / align * align; };
    std::vector<kernels::ConvertSegment> segs;
    std::size_t at = 0;
    for (auto* layers : {&bottom, &top}) {
      for (auto& dl : *layers) {
        dl.h_weight_at = at;
        at = round_up(at + sz(dl.in * dl.out));
        dl.h_bias_at = at;
        at = round_up(at + sz(dl.out));
        segs.push_back({static_cast<std::int64_t>(dl.offset), static_cast<std::int64_t>(dl.h_weight_at), dl.in * dl.out});
        segs.push_back({static_cast<std::int64_t>(dl.offset) + dl.in * dl.out, static_cast<std::int64_t>(dl.h_bias_at),
                        dl.out});
        h_max_segment = std::max(h_max_segment, std::max(dl.in * dl.out, dl.out));
      }
    }
    params_h = alloc(at * act_bytes);
    h_segments = static_cast<kernels::ConvertSegment*>(alloc(segs.size() * sizeof(kernels::ConvertSegment)));
    h_segment_count = static_cast<int>(segs.size());
    PERFCAST_CUDA_CHECK(cudaMemcpy(h_segments, segs.data(), segs.size() * sizeof(kernels::ConvertSegment),
                                   cudaMemcpyHostToDevice));
  }
  // Activations.
  bottom_act.assign(bottom.size() + 1, nullptr);
  dbottom_act.assign(bottom.size() + 1, nullptr);
  bottom_act[0] = mixed() ? alloc_act(B * cfg.dense_features()) : dense_input;  // fp32: inside the batch buffer
  for (std::size_t l = 0; l < bottom.size(); ++l) {
    bottom_act[l + 1] = alloc_act(B * bottom[l].out);
    dbottom_act[l + 1] = alloc_act(B * bottom[l].out);
  }
  top_act.assign(top.size() + 1, nullptr);
  dtop_act.assign(top.size() + 1, nullptr);
  top_act[0] = alloc_act(B * W);
  dtop_act[0] = alloc_act(B * W);
  for (std::size_t l = 0; l < top.size(); ++l) {
    top_act[l + 1] = alloc_act(B * top[l].out);
    dtop_act[l + 1] = alloc_act(B * top[l].out);
  }
  dlogits = dtop_act.back();

  // GEMM plans (row-major [B, width] activations are column-major [width, B]; see dlrm_reference.hpp).
  // Operands of act type; the weight gradient is written in fp32 straight into `grads`.
  const cudaDataType_t at = lt_type(act);
  const auto plan_layer = [&](DeviceLayer& dl, const void* x, void* y, void* dx, void* dy, bool need_dx) {
    const void* w = mixed() ? static_cast<const void*>(static_cast<unsigned char*>(params_h) + dl.h_weight_at * act_bytes)
                            : static_cast<const void*>(params + dl.offset);
    const void* bias = mixed() ? static_cast<const void*>(static_cast<unsigned char*>(params_h) + dl.h_bias_at * act_bytes)
                               : static_cast<const void*>(params + dl.offset + sz(dl.in * dl.out));
    float* dw = grads + dl.offset;
    LtGemm::Shape f;  // Y^T[out, B] = W[out, in] X^T: A = W stored [in x out] (transposed), B = X^T [in x B]
    f.trans_a = true;
    f.m = dl.out, f.n = B, f.k = dl.in, f.lda = dl.in, f.ldb = dl.in, f.ldc = dl.out;
    f.epilogue = dl.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    f.bias = bias;
    f.a_type = f.b_type = f.c_type = at;
    dl.fwd = std::make_unique<LtGemm>(lt, f, tf32, w, x, y);
    LtGemm::Shape wg;  // dW^T[in, out] = X^T[in, B] dY[B, out]: B = dY^T stored [out x B], transposed
    wg.trans_b = true;
    wg.m = dl.in, wg.n = dl.out, wg.k = B, wg.lda = dl.in, wg.ldb = dl.out, wg.ldc = dl.in;
    wg.a_type = wg.b_type = at;
    wg.c_type = CUDA_R_32F;
    dl.wgrad = std::make_unique<LtGemm>(lt, wg, tf32, x, dy, dw);
    if (need_dx) {
      LtGemm::Shape dg;  // dX^T[in, B] = W^T[in, out] dY^T[out, B]: A = W stored [in x out]
      dg.m = dl.in, dg.n = B, dg.k = dl.out, dg.lda = dl.in, dg.ldb = dl.out, dg.ldc = dl.in;
      dg.a_type = dg.b_type = dg.c_type = at;
      dl.dgrad = std::make_unique<LtGemm>(lt, dg, tf32, w, dy, dx);
    }
  };
  for (std::size_t l = 0; l < bottom.size(); ++l) {
    plan_layer(bottom[l], bottom_act[l], bottom_act[l + 1], l > 0 ? dbottom_act[l] : nullptr, dbottom_act[l + 1], l > 0);
  }
  for (std::size_t l = 0; l < top.size(); ++l) {
    plan_layer(top[l], top_act[l], top_act[l + 1], dtop_act[l], dtop_act[l + 1], true);
  }
  if (cfg.interaction == Interaction::kDot) {
    features = alloc_act(B * nf * d);
    dfeatures = alloc_act(B * nf * d);
    z = alloc_act(B * nf * nf);
    s = alloc_act(B * nf * nf);
    // Z_b[nf x nf] = F_b F_b^T; F_b row-major [nf, d] is column-major Fc [d x nf]: Z = Fc^T Fc.
    LtGemm::Shape zs;
    zs.trans_a = true;
    zs.m = nf, zs.n = nf, zs.k = d, zs.lda = d, zs.ldb = d, zs.ldc = nf;
    zs.batch = static_cast<std::int32_t>(B);
    zs.stride_a = nf * d, zs.stride_b = nf * d, zs.stride_c = nf * nf;
    zs.a_type = zs.b_type = zs.c_type = at;
    z_gemm = std::make_unique<LtGemm>(lt, zs, tf32, features, features, z);
    // dF_b = S_b F_b (S symmetric): column-major dFc[d x nf] = Fc S.
    LtGemm::Shape ds;
    ds.m = d, ds.n = nf, ds.k = nf, ds.lda = d, ds.ldb = nf, ds.ldc = d;
    ds.batch = static_cast<std::int32_t>(B);
    ds.stride_a = nf * d, ds.stride_b = nf * nf, ds.stride_c = nf * d;
    ds.a_type = ds.b_type = ds.c_type = at;
    df_gemm = std::make_unique<LtGemm>(lt, ds, tf32, features, s, dfeatures);
  }
}

/// Mixed precision: the half copy of the parameters from the fp32 master copy (one launch).
void DeviceDlrm::Impl::refresh_half_params() {
  if (!mixed()) return;
  kernels::launch_convert_segments(params, params_h, h_segments, h_segment_count, h_max_segment, act, compute);
}

void DeviceDlrm::Impl::upload(const DlrmModel& m) {
  std::vector<float> flat(sz(num_params));
  const auto put = [&](const std::vector<DenseLayer>& src, const std::vector<DeviceLayer>& dst, float* into) {
    for (std::size_t l = 0; l < src.size(); ++l) {
      std::memcpy(into + dst[l].offset, src[l].weight.data(), src[l].weight.size() * sizeof(float));
      std::memcpy(into + dst[l].offset + src[l].weight.size(), src[l].bias.data(), src[l].bias.size() * sizeof(float));
    }
  };
  put(m.bottom, bottom, flat.data());
  put(m.top, top, flat.data());
  PERFCAST_CUDA_CHECK(cudaMemcpy(params, flat.data(), flat.size() * sizeof(float), cudaMemcpyHostToDevice));
  PERFCAST_CUDA_CHECK(cudaMemset(grads, 0, flat.size() * sizeof(float)));
  PERFCAST_CUDA_CHECK(cudaDeviceSynchronize());  // the copies (legacy stream) before `compute` reads params
  refresh_half_params();                         // on `compute`, synchronized at the end
  if (adam_m) {
    if (m.adam_m.size() == m.bottom.size() + m.top.size()) {
      const std::vector<DenseLayer> mb(m.adam_m.begin(), m.adam_m.begin() + static_cast<std::ptrdiff_t>(m.bottom.size()));
      const std::vector<DenseLayer> mt(m.adam_m.begin() + static_cast<std::ptrdiff_t>(m.bottom.size()), m.adam_m.end());
      const std::vector<DenseLayer> vb(m.adam_v.begin(), m.adam_v.begin() + static_cast<std::ptrdiff_t>(m.bottom.size()));
      const std::vector<DenseLayer> vt(m.adam_v.begin() + static_cast<std::ptrdiff_t>(m.bottom.size()), m.adam_v.end());
      std::vector<float> fm(flat.size()), fv(flat.size());
      put(mb, bottom, fm.data());
      put(mt, top, fm.data());
      put(vb, bottom, fv.data());
      put(vt, top, fv.data());
      PERFCAST_CUDA_CHECK(cudaMemcpy(adam_m, fm.data(), fm.size() * sizeof(float), cudaMemcpyHostToDevice));
      PERFCAST_CUDA_CHECK(cudaMemcpy(adam_v, fv.data(), fv.size() * sizeof(float), cudaMemcpyHostToDevice));
    } else {
      PERFCAST_CUDA_CHECK(cudaMemset(adam_m, 0, flat.size() * sizeof(float)));
      PERFCAST_CUDA_CHECK(cudaMemset(adam_v, 0, flat.size() * sizeof(float)));
    }
    adam_step = m.adam_step;
  }
  // Embeddings: uploaded from the model (one GPU, when it has them) or drawn on the device,
  // each layout table as its slice of the workload table (the whole table on one GPU).
  const auto wbytes = static_cast<std::size_t>(profiler::weight_bytes(cfg.embedding_precision));
  for (auto& g : groups) {
    if (!g.used) continue;
    const auto& L = g.layout;
    if (!sharded() && m.embeddings.size() > 0) {
      if (m.embeddings.size() != L.total_weight_elements || m.embeddings.precision() != cfg.embedding_precision) {
        throw std::invalid_argument("DeviceDlrm: model embeddings do not match the config");
      }
      PERFCAST_CUDA_CHECK(cudaMemcpy(g.weights, m.embeddings.data(), m.embeddings.size_bytes(), cudaMemcpyHostToDevice));
    } else {
      for (std::size_t k = 0; k < L.tables.size(); ++k) {
        const auto& tm = L.tables[k];
        const device_detail::ShardOrigin& o = g.origins[k];
        const auto& full = cfg.tables[o.table];
        const float a = embedding_init_bound(full.rows);
        kernels::launch_fill_counter_uniform_slice(static_cast<unsigned char*>(g.weights) + sz(tm.weight_offset) * wbytes,
                                                   cfg.embedding_precision, tm.rows, tm.dim, full.dim, o.row_offset,
                                                   o.col_offset, opt.seed, embedding_stream(o.table), -a, a, compute);
      }
    }
    if (g.rowwise_state) {
      if (!sharded() && m.rowwise_state.size() == sz(L.total_rows)) {
        PERFCAST_CUDA_CHECK(cudaMemcpy(g.rowwise_state, m.rowwise_state.data(), m.rowwise_state.size() * sizeof(float),
                                       cudaMemcpyHostToDevice));
      } else {
        PERFCAST_CUDA_CHECK(cudaMemset(g.rowwise_state, 0, sz(L.total_rows) * sizeof(float)));
      }
    }
    PERFCAST_CUDA_CHECK(cudaMemcpy(g.tables, L.tables.data(), L.tables.size() * sizeof(profiler::EmbeddingTableMeta),
                                   cudaMemcpyHostToDevice));
  }
  // Everything: the legacy-stream copies and memsets above (a pageable cudaMemcpy may return
  // before its DMA lands) and the fills on `compute`, before the first step reads them.
  PERFCAST_CUDA_CHECK(cudaDeviceSynchronize());
}

void DeviceDlrm::Impl::init_common(const DlrmModel& model, const DeviceDlrmOptions& options) {
  const int count = profiler::cuda_device_count();
  if (count == 0) throw profiler::NoCudaDeviceError("no CUDA device visible");
  if (options.device < 0 || options.device >= count) {
    throw profiler::NoCudaDeviceError(fmt::format("device {} asked for, {} visible", options.device, count));
  }
  model.config.validate();
  cfg = model.config;
  opt = options;
  B = cfg.batch_size;
  d = cfg.bottom_mlp.back();
  W = cfg.interaction_width();
  T = static_cast<std::int64_t>(cfg.tables.size());
  nf = T + 1;
  grad_denominator = B;
  for (const auto& t : cfg.tables) total_dim += t.dim;
  if (B > (std::int64_t{1} << 30)) throw std::invalid_argument("DeviceDlrm: batch out of range");
  PERFCAST_CUDA_CHECK(cudaSetDevice(options.device));
  PERFCAST_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  PERFCAST_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  PERFCAST_CUDA_CHECK(cudaEventCreate(&ev_start));
  PERFCAST_CUDA_CHECK(cudaEventCreate(&ev_end));
  PERFCAST_CUDA_CHECK(cudaEventCreateWithFlags(&ev_copied, cudaEventDisableTiming));
  PERFCAST_LT_CHECK(cublasLtCreate(&lt));
  lt_workspace = DeviceBuffer(kLtWorkspaceBytes);
  total_bytes += kLtWorkspaceBytes;
}

void DeviceDlrm::Impl::plan_groups_single(const DlrmModel& m) {
  auto& g = groups[0];
  g.used = true;
  g.layout = m.layout;
  for (std::size_t t = 0; t < cfg.tables.size(); ++t) g.origins.push_back({t, 0, 0});
  g.capacity = std::max<std::int64_t>(opt.max_indices, 1);
}

/// Allocates the device batch buffer (dense, labels, every used group's offsets, then their
/// indices at fixed capacity), the groups' weights, state and table metadata, and the
/// embedding workspace (shared: the groups' backward passes run one after another).
void DeviceDlrm::Impl::allocate_batch_and_groups() {
  std::size_t at = 0;
  dense_at = at;
  at = device_detail::align256(at + sz(B * cfg.dense_features()) * 4);
  labels_at = at;
  at = device_detail::align256(at + sz(B) * 4);
  for (auto& g : groups) {
    if (!g.used) continue;
    g.offsets_at = at;
    at = device_detail::align256(at + sz(g.layout.num_bags() + 1) * 8);
  }
  fixed_bytes = at;
  std::int64_t max_capacity = 1;
  for (auto& g : groups) {
    if (!g.used) continue;
    if (g.capacity < 0 || g.capacity >= (std::int64_t{1} << 31)) {
      throw std::invalid_argument("DeviceDlrm: index capacity out of range");
    }
    g.indices_at = at;
    at = device_detail::align256(at + sz(std::max<std::int64_t>(g.capacity, 1)) * 8);
    max_capacity = std::max(max_capacity, g.capacity);
  }
  batch_dev = static_cast<unsigned char*>(alloc(at));
  loss_dev = alloc_f(1);
  loss_host = std::make_unique<PinnedBuffer>(sizeof(float));
  const auto wbytes = static_cast<std::size_t>(profiler::weight_bytes(cfg.embedding_precision));
  for (auto& g : groups) {
    if (!g.used) continue;
    g.weights = alloc(sz(g.layout.total_weight_elements) * wbytes);
    if (cfg.embedding_optimizer == EmbeddingOptimizer::kRowwiseAdagrad) g.rowwise_state = alloc_f(g.layout.total_rows);
    g.tables = static_cast<profiler::EmbeddingTableMeta*>(alloc(g.layout.tables.size() * sizeof(profiler::EmbeddingTableMeta)));
  }
  emb_workspace_bytes = profiler::kernels::embedding_bag_backward_workspace_bytes(max_capacity);
  emb_workspace = alloc(emb_workspace_bytes);
}

DeviceDlrm::DeviceDlrm(const DlrmModel& model, const DeviceDlrmOptions& options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  s.init_common(model, options);
  if (s.opt.max_indices < 0 || s.opt.max_indices >= (std::int64_t{1} << 31)) {
    throw std::invalid_argument("DeviceDlrm: max_indices out of range");
  }
  s.plan_groups_single(model);
  s.allocate_batch_and_groups();
  s.pooled = s.alloc_f(s.B * s.total_dim);
  s.dpooled = s.alloc_f(s.B * s.total_dim);
  s.groups[0].out = s.pooled;
  s.groups[0].dout = s.dpooled;
  s.build_layers(model, reinterpret_cast<float*>(s.batch_dev + s.dense_at));
  s.upload(model);
}

DeviceDlrm::~DeviceDlrm() = default;

int DeviceDlrm::Impl::stage(const float* dense, const float* labels, const std::array<const GroupInput*, 3>& inputs) {
  Staged st;
  std::size_t at = fixed_bytes;
  bool first = true;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].used) continue;
    const GroupInput& in = *inputs[g];
    const auto n = static_cast<std::int64_t>(in.indices.size());
    profiler::validate_embedding_bag_batch(groups[g].layout, in.indices, in.offsets);
    if (n > groups[g].capacity) {
      throw std::invalid_argument(fmt::format("DeviceDlrm::add_batch: {} indices in lookup group {}, capacity {}", n, g,
                                              groups[g].capacity));
    }
    st.num_indices[g] = n;
    st.host_at[g] = at;
    at = (first ? at + sz(n) * 8 : device_detail::align256(at + sz(n) * 8));
    if (first) {
      st.first_copy_bytes = at;
      at = device_detail::align256(at);
      first = false;
    }
  }
  st.host = std::make_unique<PinnedBuffer>(at);
  unsigned char* h = st.host->data();
  std::memset(h, 0, fixed_bytes);
  std::memcpy(h + dense_at, dense, sz(B * cfg.dense_features()) * 4);
  std::memcpy(h + labels_at, labels, sz(B) * 4);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].used) continue;
    const GroupInput& in = *inputs[g];
    std::memcpy(h + groups[g].offsets_at, in.offsets.data(), in.offsets.size() * 8);
    if (!in.indices.empty()) std::memcpy(h + st.host_at[g], in.indices.data(), in.indices.size() * 8);
  }
  staged.push_back(std::move(st));
  return static_cast<int>(staged.size()) - 1;
}

int DeviceDlrm::add_batch(const DlrmBatch& batch) {
  auto& s = *impl_;
  if (s.sharded()) throw std::logic_error("DeviceDlrm::add_batch: a multi-GPU rank takes a RankInput");
  if (batch.dense.size() != sz(s.B * s.cfg.dense_features()) || batch.labels.size() != sz(s.B)) {
    throw std::invalid_argument("DeviceDlrm::add_batch: dense or label count does not match the config");
  }
  GroupInput all;
  all.bags = s.B;
  all.indices = batch.indices;
  all.offsets = batch.offsets;
  return s.stage(batch.dense.data(), batch.labels.data(), {&all, nullptr, nullptr});
}

profiler::kernels::EmbeddingBagDeviceBatch DeviceDlrm::Impl::device_batch(int g, const Staged& st,
                                                                 profiler::WeightPrecision precision) const {
  const auto& grp = groups[sz(g)];
  auto eb = profiler::kernels::make_device_batch(grp.layout, precision, profiler::PoolingMode::kSum,
                                                 st.num_indices[sz(g)]);
  eb.tables = grp.tables;
  eb.indices = reinterpret_cast<const std::int64_t*>(batch_dev + grp.indices_at);
  eb.offsets = reinterpret_cast<const std::int64_t*>(batch_dev + grp.offsets_at);
  return eb;
}

/// H2D copy of the batch on the copy stream, after the previous step (ev_start on compute):
/// one copy of the fixed part and the first group's indices, one more per other used group.
void DeviceDlrm::Impl::copy_batch(const Staged& st) {
  PERFCAST_CUDA_CHECK(cudaStreamWaitEvent(copy, ev_start, 0));
  bool first = true;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].used) continue;
    if (first) {
      PERFCAST_CUDA_CHECK(cudaMemcpyAsync(batch_dev, st.host->data(), st.first_copy_bytes, cudaMemcpyHostToDevice, copy));
      first = false;
    } else if (st.num_indices[g] > 0) {
      PERFCAST_CUDA_CHECK(cudaMemcpyAsync(batch_dev + groups[g].indices_at, st.host->data() + st.host_at[g],
                                          sz(st.num_indices[g]) * 8, cudaMemcpyHostToDevice, copy));
    }
  }
  PERFCAST_CUDA_CHECK(cudaEventRecord(ev_copied, copy));
  PERFCAST_CUDA_CHECK(cudaStreamWaitEvent(compute, ev_copied, 0));
}

/// Backward of one MLP layer; on a rank, launches the DDP all-reduce of the bucket it completes.
void DeviceDlrm::Impl::layer_backward(const DeviceLayer& l, void* y, void* dy, int layer_index, void* ws) {
  cudaStream_t cs = compute;
  if (l.relu) kernels::launch_relu_backward(dy, y, B * l.out, act, cs);
  l.wgrad->run(ws, cs);
  kernels::launch_bias_grad(dy, B, l.out, grads + l.offset + sz(l.in * l.out), act, cs);
  if (l.dgrad) l.dgrad->run(ws, cs);
  if (sharded()) ddp_bucket_done(layer_index);
}

void DeviceDlrm::Impl::forward_backward_update(const Staged& st) {
  cudaStream_t cs = compute;
  void* ws = lt_workspace.get();
  copy_batch(st);
  const auto eo = embedding_optimizer_config(cfg);
  std::array<profiler::kernels::EmbeddingBagDeviceBatch, 3> eb{};
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].used) eb[g] = device_batch(static_cast<int>(g), st, cfg.embedding_precision);
  }

  // ---- forward ----
  if (mixed()) {  // autocast: the fp32 dense features cast for the first layer
    kernels::launch_convert(reinterpret_cast<const float*>(batch_dev + dense_at), bottom_act[0],
                            B * cfg.dense_features(), act, cs);
  }
  for (const auto& l : bottom) l.fwd->run(ws, cs);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].used) profiler::kernels::launch_embedding_bag_forward(eb[g], groups[g].weights, groups[g].out, cs);
  }
  if (sharded()) exchange_forward();
  const void* bottom_out = bottom_act.back();
  if (cfg.interaction == Interaction::kDot) {
    kernels::launch_concat_rows(bottom_out, d, pooled, T * d, features, B, act, cs);
    z_gemm->run(ws, cs);
    kernels::launch_interaction_gather(bottom_out, d, z, nf, top_act[0], B, act, cs);
  } else {
    kernels::launch_concat_rows(bottom_out, d, pooled, total_dim, top_act[0], B, act, cs);
  }
  for (const auto& l : top) l.fwd->run(ws, cs);
  const float* labels = reinterpret_cast<const float*>(batch_dev + labels_at);
  kernels::launch_bce_with_logits(top_act.back(), labels, B, grad_denominator, loss_scale, loss_dev, dlogits, act, cs);

  // ---- backward (autograd order: top MLP, interaction, embeddings, bottom MLP) ----
  const auto nb = static_cast<int>(bottom.size());
  for (std::size_t l = top.size(); l-- > 0;) {
    layer_backward(top[l], top_act[l + 1], dtop_act[l + 1], nb + static_cast<int>(l), ws);
  }
  void* dbottom_out = dbottom_act.back();
  const float unscale = 1.0f / loss_scale;  // exact: a power of two
  if (cfg.interaction == Interaction::kDot) {
    kernels::launch_interaction_scatter(dtop_act[0], d, nf, s, B, act, cs);
    df_gemm->run(ws, cs);
    kernels::launch_split_rows(dfeatures, d, T * d, dbottom_out, dtop_act[0], W, dpooled, unscale, B, act, cs);
  } else {
    kernels::launch_split_rows(dtop_act[0], d, total_dim, dbottom_out, nullptr, 0, dpooled, unscale, B, act, cs);
  }
  if (!sharded()) {
    profiler::kernels::launch_embedding_bag_backward_update(eb[0], groups[0].weights, groups[0].rowwise_state, dpooled,
                                                            eo, emb_workspace, emb_workspace_bytes, cs);
    for (std::size_t l = bottom.size(); l-- > 0;) {
      layer_backward(bottom[l], bottom_act[l + 1], dbottom_act[l + 1], static_cast<int>(l), ws);
    }
  }
  if (sharded()) exchange_backward(st, eb, eo, ws);

  // ---- dense optimizer (one fused kernel over all MLP parameters) ----
  const auto& h = cfg.hyper;
  if (cfg.dense_optimizer == DenseOptimizer::kSgd) {
    kernels::launch_sgd(params, grads, num_params, h.dense_lr, unscale, cs);
  } else {
    adam_step += 1;
    const auto t = static_cast<double>(adam_step);
    const auto c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(h.adam_beta1), t)));
    const auto c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(h.adam_beta2), t)));
    kernels::launch_adam(params, grads, adam_m, adam_v, num_params, h.adam_lr, h.adam_beta1, h.adam_beta2, h.adam_eps,
                         c1, c2, unscale, cs);
  }
  refresh_half_params();
  // loss.item()
  PERFCAST_CUDA_CHECK(cudaMemcpyAsync(loss_host->data(), loss_dev, sizeof(float), cudaMemcpyDeviceToHost, cs));
}

float DeviceDlrm::step(int id, StepTiming* timing) {
  auto& s = *impl_;
  if (id < 0 || id >= static_cast<int>(s.staged.size())) throw std::out_of_range("DeviceDlrm::step: no such batch");
  PERFCAST_CUDA_CHECK(cudaSetDevice(s.opt.device));
  const auto t0 = std::chrono::steady_clock::now();
  PERFCAST_CUDA_CHECK(cudaEventRecord(s.ev_start, s.compute));
  s.forward_backward_update(s.staged[sz(id)]);
  PERFCAST_CUDA_CHECK(cudaEventRecord(s.ev_end, s.compute));
  PERFCAST_CUDA_CHECK(cudaStreamSynchronize(s.compute));
  const auto t1 = std::chrono::steady_clock::now();
  float loss = 0;
  std::memcpy(&loss, s.loss_host->data(), sizeof(float));
  if (!std::isfinite(loss)) {
    // fp16 has no overflow check (static loss scale): an inf gradient turns the master
    // weights into NaN, and training on them measures nothing.
    throw std::runtime_error(fmt::format("DeviceDlrm::step: the loss is {} (diverged{})", loss,
                                         s.mixed() ? ", or an fp16 overflow" : ""));
  }
  if (timing) {
    float ms = 0;
    PERFCAST_CUDA_CHECK(cudaEventElapsedTime(&ms, s.ev_start, s.ev_end));
    timing->event_s = static_cast<double>(ms) * 1e-3;
    timing->host_s = std::chrono::duration<double>(t1 - t0).count();
  }
  return loss;
}

void DeviceDlrm::download(DlrmModel& model) const {
  const auto& s = *impl_;
  PERFCAST_CUDA_CHECK(cudaSetDevice(s.opt.device));
  PERFCAST_CUDA_CHECK(cudaStreamSynchronize(s.compute));
  if (s.comm_stream) PERFCAST_CUDA_CHECK(cudaStreamSynchronize(s.comm_stream));
  std::vector<float> flat(sz(s.num_params));
  const auto get = [&](const float* dev, std::vector<DenseLayer>& dst, const std::vector<DeviceLayer>& src) {
    for (std::size_t l = 0; l < src.size(); ++l) {
      dst[l].weight.resize(sz(src[l].in * src[l].out));
      dst[l].bias.resize(sz(src[l].out));
      PERFCAST_CUDA_CHECK(cudaMemcpy(dst[l].weight.data(), dev + src[l].offset, dst[l].weight.size() * sizeof(float),
                                     cudaMemcpyDeviceToHost));
      PERFCAST_CUDA_CHECK(cudaMemcpy(dst[l].bias.data(), dev + src[l].offset + dst[l].weight.size(),
                                     dst[l].bias.size() * sizeof(float), cudaMemcpyDeviceToHost));
    }
  };
  if (model.bottom.size() != s.bottom.size() || model.top.size() != s.top.size()) {
    throw std::invalid_argument("DeviceDlrm::download: model has a different number of layers");
  }
  get(s.params, model.bottom, s.bottom);
  get(s.params, model.top, s.top);
  if (s.adam_m) {
    model.adam_m.resize(s.bottom.size() + s.top.size());
    model.adam_v.resize(s.bottom.size() + s.top.size());
    std::vector<DenseLayer> mb(s.bottom.size()), mt(s.top.size()), vb(s.bottom.size()), vt(s.top.size());
    get(s.adam_m, mb, s.bottom);
    get(s.adam_m, mt, s.top);
    get(s.adam_v, vb, s.bottom);
    get(s.adam_v, vt, s.top);
    for (std::size_t l = 0; l < mb.size(); ++l) model.adam_m[l] = mb[l], model.adam_v[l] = vb[l];
    for (std::size_t l = 0; l < mt.size(); ++l) model.adam_m[mb.size() + l] = mt[l], model.adam_v[mb.size() + l] = vt[l];
    model.adam_step = s.adam_step;
  }
  if (s.sharded()) {
    model.embeddings = profiler::HostEmbeddingWeights{};
    model.rowwise_state.clear();
    return;
  }
  const auto& g = s.groups[0];
  model.embeddings = profiler::HostEmbeddingWeights(s.cfg.embedding_precision, g.layout.total_weight_elements);
  PERFCAST_CUDA_CHECK(cudaMemcpy(model.embeddings.data(), g.weights, model.embeddings.size_bytes(), cudaMemcpyDeviceToHost));
  model.rowwise_state.assign(sz(g.layout.total_rows), 0.0f);
  if (g.rowwise_state) {
    PERFCAST_CUDA_CHECK(cudaMemcpy(model.rowwise_state.data(), g.rowwise_state,
                                   model.rowwise_state.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }
}

std::size_t DeviceDlrm::device_bytes() const { return impl_->total_bytes; }

}  // namespace perfcast::validation
