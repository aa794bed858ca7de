#include "validation/device_dlrm.hpp"

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
#include "validation/executor_kernels.hpp"

namespace perfcast::validation {
namespace {

void lt_check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(fmt::format("{}:{}: cuBLASLt: {} failed with status {} ({})", file, line, call,
                                         static_cast<int>(s), cublasLtGetStatusString(s)));
  }
}
#define PERFCAST_LT_CHECK(call) lt_check((call), #call, __FILE__, __LINE__)

/// cuBLASLt workspace: 32 MiB, NVIDIA's recommendation for Hopper (cuBLAS documentation,
/// "cublasSetWorkspace"), as in profiler/bench_gemm.cpp.
constexpr std::size_t kLtWorkspaceBytes = 32u << 20;

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

/// One device allocation; throws CudaError naming the bytes when cudaMalloc fails.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t e = cudaMalloc(&p_, bytes);
    if (e != cudaSuccess) {
      throw profiler::CudaError(static_cast<int>(e), fmt::format("cudaMalloc({} bytes)", bytes), cudaGetErrorString(e),
                                __FILE__, __LINE__);
    }
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  [[nodiscard]] float* f() const { return static_cast<float*>(p_); }
  [[nodiscard]] void* get() const { return p_; }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Pinned host allocation.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
    PERFCAST_CUDA_CHECK(cudaMallocHost(&p_, bytes == 0 ? 1 : bytes));
  }
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  [[nodiscard]] unsigned char* data() const { return static_cast<unsigned char*>(p_); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A planned column-major cuBLASLt matmul C[m x n] = op(A) op(B) (+ bias, ReLU per epilogue),
/// optionally strided-batched; operand pointers are fixed at planning time.
class LtGemm {
 public:
  struct Shape {
    bool trans_a = false, trans_b = false;
    std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    std::int32_t batch = 1;
    std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const float* bias = nullptr;  ///< [m], for the BIAS epilogues
  };

  LtGemm(cublasLtHandle_t lt, const Shape& s, bool tf32, const float* a, const float* b, float* c)
      : lt_(lt), a_(a), b_(b), c_(c) {
    const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    PERFCAST_LT_CHECK(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
    const cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    PERFCAST_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    PERFCAST_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (s.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      PERFCAST_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue,
                                                       sizeof(s.epilogue)));
      if (s.bias) {
        PERFCAST_LT_CHECK(
            cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof(s.bias)));
      }
    }
    // Stored shapes: op(A) is m x k, so A is stored k x m when transposed.
    const auto rows_a = static_cast<std::uint64_t>(s.trans_a ? s.k : s.m);
    const auto cols_a = static_cast<std::uint64_t>(s.trans_a ? s.m : s.k);
    const auto rows_b = static_cast<std::uint64_t>(s.trans_b ? s.n : s.k);
    const auto cols_b = static_cast<std::uint64_t>(s.trans_b ? s.k : s.n);
    PERFCAST_LT_CHECK(cublasLtMatrixLayoutCreate(&la_, CUDA_R_32F, rows_a, cols_a, s.lda));
    PERFCAST_LT_CHECK(cublasLtMatrixLayoutCreate(&lb_, CUDA_R_32F, rows_b, cols_b, s.ldb));
    PERFCAST_LT_CHECK(cublasLtMatrixLayoutCreate(&lc_, CUDA_R_32F, static_cast<std::uint64_t>(s.m),
                                                 static_cast<std::uint64_t>(s.n), s.ldc));
    if (s.batch > 1) {
      for (auto [l, stride] : {std::pair{la_, s.stride_a}, std::pair{lb_, s.stride_b}, std::pair{lc_, s.stride_c}}) {
        PERFCAST_LT_CHECK(
            cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &s.batch, sizeof(s.batch)));
        PERFCAST_LT_CHECK(
            cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    PERFCAST_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t ws = kLtWorkspaceBytes;
    const cublasStatus_t ps =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    int returned = 0;
    const cublasStatus_t hs = ps != CUBLAS_STATUS_SUCCESS
                                  ? ps
                                  : cublasLtMatmulAlgoGetHeuristic(lt_, desc_, la_, lb_, lc_, lc_, pref, 1, &algo_, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    PERFCAST_LT_CHECK(hs);
    if (returned == 0) {
      throw std::runtime_error(fmt::format("cuBLASLt: no algorithm for m={} n={} k={} batch={} epilogue={}", s.m, s.n,
                                           s.k, s.batch, static_cast<int>(s.epilogue)));
    }
  }
  ~LtGemm() {
    if (la_) cublasLtMatrixLayoutDestroy(la_);
    if (lb_) cublasLtMatrixLayoutDestroy(lb_);
    if (lc_) cublasLtMatrixLayoutDestroy(lc_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void run(void* workspace, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    PERFCAST_LT_CHECK(cublasLtMatmul(lt_, desc_, &alpha, a_, la_, b_, lb_, &beta, c_, lc_, c_, lc_, &algo_.algo,
                                     workspace, kLtWorkspaceBytes, stream));
  }

 private:
  cublasLtHandle_t lt_;
  const float* a_;
  const float* b_;
  float* c_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulHeuristicResult_t algo_{};
};

/// One MLP layer on the device: parameter and gradient views into the flat buffers, and its
/// three GEMMs (forward with epilogue, data gradient, weight gradient).
struct DeviceLayer {
  std::int64_t in = 0, out = 0;
  std::size_t offset = 0;  // element offset of the weights in the flat parameter buffer; bias follows
  bool relu = true;
  std::unique_ptr<LtGemm> fwd, dgrad, wgrad;
};

/// Byte layout of one staged batch (identical on host and device), each part starting on a
/// 256-byte boundary: offsets int64 [T*B+1], dense fp32 [B*F], labels fp32 [B], indices int64 [n].
struct BatchLayout {
  std::size_t offsets = 0, dense = 0, labels = 0, indices = 0;  // byte offsets
  std::size_t fixed_bytes = 0;                                  // bytes before the indices
};

/// Rounds up to 256 bytes, the alignment cuBLASLt's heuristic assumes by default
/// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES) and cudaMalloc guarantees.
std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

BatchLayout batch_layout(std::int64_t tables, std::int64_t batch, std::int64_t features) {
  BatchLayout l;
  l.offsets = 0;
  l.dense = align256(sz(tables * batch + 1) * 8);
  l.labels = align256(l.dense + sz(batch * features) * 4);
  l.indices = align256(l.labels + sz(batch) * 4);
  l.fixed_bytes = l.indices;
  return l;
}

struct Staged {
  std::unique_ptr<PinnedBuffer> host;
  std::int64_t num_indices = 0;
};

}  // namespace

struct DeviceDlrm::Impl {
  DlrmConfig cfg;
  DeviceDlrmOptions opt;
  profiler::EmbeddingBagLayout layout;
  std::int64_t B = 0, d = 0, W = 0, T = 0, nf = 0;  // batch, bottom width, interaction width, tables, features
  cudaStream_t compute = nullptr, copy = nullptr;
  cudaEvent_t ev_start = nullptr, ev_end = nullptr, ev_copied = nullptr;
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
  std::vector<DeviceLayer> bottom, top;
  std::vector<float*> bottom_act, top_act;    // [0] = input, [l+1] = output of layer l
  std::vector<float*> dbottom_act, dtop_act;  // gradients of the same
  float* pooled = nullptr;                    // [B, total_dim]
  float* dpooled = nullptr;
  float* features = nullptr;                  // dot: [B, nf, d]
  float* dfeatures = nullptr;
  float* z = nullptr;                         // dot: [B, nf, nf]
  float* s = nullptr;                         // dot: symmetric dZ
  std::unique_ptr<LtGemm> z_gemm, df_gemm;
  // Embeddings.
  void* emb_weights = nullptr;
  float* rowwise_state = nullptr;
  profiler::EmbeddingTableMeta* tables = nullptr;
  void* emb_workspace = nullptr;
  std::size_t emb_workspace_bytes = 0;
  // Batch on the device and loss.
  BatchLayout bl;
  unsigned char* batch_dev = nullptr;
  float* loss_dev = nullptr;
  float* dlogits = nullptr;
  std::unique_ptr<PinnedBuffer> loss_host;
  std::vector<Staged> staged;

  float* alloc_f(std::int64_t n) { return static_cast<float*>(alloc(sz(n) * sizeof(float))); }
  void* alloc(std::size_t bytes) {
    owned.emplace_back(bytes);
    total_bytes += bytes;
    return owned.back().get();
  }

  ~Impl() {
    // Plans before the handle; buffers (owned) after the stream work is done.
    if (compute) cudaStreamSynchronize(compute);
    if (copy) cudaStreamSynchronize(copy);
    bottom.clear();
    top.clear();
    z_gemm.reset();
    df_gemm.reset();
    if (lt) cublasLtDestroy(lt);
    for (auto e : {ev_start, ev_end, ev_copied}) {
      if (e) cudaEventDestroy(e);
    }
    if (compute) cudaStreamDestroy(compute);
    if (copy) cudaStreamDestroy(copy);
  }

  void build_layers(const DlrmModel& m, float* dense_input);
  void upload(const DlrmModel& m);
  void forward_backward_update(const Staged& st);
};

void DeviceDlrm::Impl::build_layers(const DlrmModel& m, float* dense_input) {
  const bool tf32 = opt.tf32;
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
  // Activations.
  bottom_act.assign(bottom.size() + 1, nullptr);
  dbottom_act.assign(bottom.size() + 1, nullptr);
  bottom_act[0] = dense_input;  // inside the device batch buffer
  for (std::size_t l = 0; l < bottom.size(); ++l) {
    bottom_act[l + 1] = alloc_f(B * bottom[l].out);
    dbottom_act[l + 1] = alloc_f(B * bottom[l].out);
  }
  top_act.assign(top.size() + 1, nullptr);
  dtop_act.assign(top.size() + 1, nullptr);
  top_act[0] = alloc_f(B * W);
  dtop_act[0] = alloc_f(B * W);
  for (std::size_t l = 0; l < top.size(); ++l) {
    top_act[l + 1] = alloc_f(B * top[l].out);
    dtop_act[l + 1] = alloc_f(B * top[l].out);
  }
  dlogits = dtop_act.back();
  pooled = alloc_f(B * layout.total_dim);
  dpooled = alloc_f(B * layout.total_dim);

  // GEMM plans (row-major [B, width] activations are column-major [width, B]; see dlrm_reference.hpp).
  const auto plan_layer = [&](DeviceLayer& dl, const float* x, float* y, float* dx, float* dy, bool need_dx) {
    const float* w = params + dl.offset;
    const float* bias = w + dl.in * dl.out;
    float* dw = grads + dl.offset;
    LtGemm::Shape f;  // Y^T[out, B] = W[out, in] X^T: A = W stored [in x out] (transposed), B = X^T [in x B]
    f.trans_a = true;
    f.m = dl.out, f.n = B, f.k = dl.in, f.lda = dl.in, f.ldb = dl.in, f.ldc = dl.out;
    f.epilogue = dl.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    f.bias = bias;
    dl.fwd = std::make_unique<LtGemm>(lt, f, tf32, w, x, y);
    LtGemm::Shape wg;  // dW^T[in, out] = X^T[in, B] dY[B, out]: B = dY^T stored [out x B], transposed
    wg.trans_b = true;
    wg.m = dl.in, wg.n = dl.out, wg.k = B, wg.lda = dl.in, wg.ldb = dl.out, wg.ldc = dl.in;
    dl.wgrad = std::make_unique<LtGemm>(lt, wg, tf32, x, dy, dw);
    if (need_dx) {
      LtGemm::Shape dg;  // dX^T[in, B] = W^T[in, out] dY^T[out, B]: A = W stored [in x out]
      dg.m = dl.in, dg.n = B, dg.k = dl.out, dg.lda = dl.in, dg.ldb = dl.out, dg.ldc = dl.in;
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
    features = alloc_f(B * nf * d);
    dfeatures = alloc_f(B * nf * d);
    z = alloc_f(B * nf * nf);
    s = alloc_f(B * nf * nf);
    // Z_b[nf x nf] = F_b F_b^T; F_b row-major [nf, d] is column-major Fc [d x nf]: Z = Fc^T Fc.
    LtGemm::Shape zs;
    zs.trans_a = true;
    zs.m = nf, zs.n = nf, zs.k = d, zs.lda = d, zs.ldb = d, zs.ldc = nf;
    zs.batch = static_cast<std::int32_t>(B);
    zs.stride_a = nf * d, zs.stride_b = nf * d, zs.stride_c = nf * nf;
    z_gemm = std::make_unique<LtGemm>(lt, zs, tf32, features, features, z);
    // dF_b = S_b F_b (S symmetric): column-major dFc[d x nf] = Fc S.
    LtGemm::Shape ds;
    ds.m = d, ds.n = nf, ds.k = nf, ds.lda = d, ds.ldb = nf, ds.ldc = d;
    ds.batch = static_cast<std::int32_t>(B);
    ds.stride_a = nf * d, ds.stride_b = nf * nf, ds.stride_c = nf * d;
    df_gemm = std::make_unique<LtGemm>(lt, ds, tf32, features, s, dfeatures);
  }
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
  // Embeddings.
  const auto wbytes = static_cast<std::size_t>(profiler::weight_bytes(cfg.embedding_precision));
  if (m.embeddings.size() > 0) {
    if (m.embeddings.size() != layout.total_weight_elements || m.embeddings.precision() != cfg.embedding_precision) {
      throw std::invalid_argument("DeviceDlrm: model embeddings do not match the config");
    }
    PERFCAST_CUDA_CHECK(cudaMemcpy(emb_weights, m.embeddings.data(), m.embeddings.size_bytes(), cudaMemcpyHostToDevice));
  } else {
    for (std::size_t t = 0; t < layout.tables.size(); ++t) {
      const auto& tm = layout.tables[t];
      const float a = embedding_init_bound(tm.rows);
      kernels::launch_fill_counter_uniform(static_cast<unsigned char*>(emb_weights) + sz(tm.weight_offset) * wbytes,
                                           cfg.embedding_precision, tm.rows * tm.dim, opt.seed, embedding_stream(t), -a, a,
                                           compute);
    }
  }
  if (rowwise_state) {
    if (m.rowwise_state.size() == sz(layout.total_rows)) {
      PERFCAST_CUDA_CHECK(cudaMemcpy(rowwise_state, m.rowwise_state.data(), m.rowwise_state.size() * sizeof(float),
                                     cudaMemcpyHostToDevice));
    } else {
      PERFCAST_CUDA_CHECK(cudaMemset(rowwise_state, 0, sz(layout.total_rows) * sizeof(float)));
    }
  }
  PERFCAST_CUDA_CHECK(cudaMemcpy(tables, layout.tables.data(), layout.tables.size() * sizeof(profiler::EmbeddingTableMeta),
                                 cudaMemcpyHostToDevice));
  PERFCAST_CUDA_CHECK(cudaStreamSynchronize(compute));
}

DeviceDlrm::DeviceDlrm(const DlrmModel& model, const DeviceDlrmOptions& options) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  const int count = profiler::cuda_device_count();
  if (count == 0) throw profiler::NoCudaDeviceError("no CUDA device visible");
  if (options.device < 0 || options.device >= count) {
    throw profiler::NoCudaDeviceError(fmt::format("device {} asked for, {} visible", options.device, count));
  }
  model.config.validate();
  s.cfg = model.config;
  s.opt = options;
  s.layout = model.layout;
  s.B = s.cfg.batch_size;
  s.d = s.cfg.bottom_mlp.back();
  s.W = s.cfg.interaction_width();
  s.T = static_cast<std::int64_t>(s.cfg.tables.size());
  s.nf = s.T + 1;
  if (s.B > (std::int64_t{1} << 30) || s.opt.max_indices < 0 || s.opt.max_indices >= (std::int64_t{1} << 31)) {
    throw std::invalid_argument("DeviceDlrm: batch or max_indices out of range");
  }
  PERFCAST_CUDA_CHECK(cudaSetDevice(options.device));
  PERFCAST_CUDA_CHECK(cudaStreamCreateWithFlags(&s.compute, cudaStreamNonBlocking));
  PERFCAST_CUDA_CHECK(cudaStreamCreateWithFlags(&s.copy, cudaStreamNonBlocking));
  PERFCAST_CUDA_CHECK(cudaEventCreate(&s.ev_start));
  PERFCAST_CUDA_CHECK(cudaEventCreate(&s.ev_end));
  PERFCAST_CUDA_CHECK(cudaEventCreateWithFlags(&s.ev_copied, cudaEventDisableTiming));
  PERFCAST_LT_CHECK(cublasLtCreate(&s.lt));
  s.lt_workspace = DeviceBuffer(kLtWorkspaceBytes);
  s.total_bytes += kLtWorkspaceBytes;

  s.bl = batch_layout(s.T, s.B, s.cfg.dense_features());
  s.batch_dev = static_cast<unsigned char*>(s.alloc(s.bl.fixed_bytes + sz(std::max<std::int64_t>(s.opt.max_indices, 1)) * 8));
  s.loss_dev = s.alloc_f(1);
  s.loss_host = std::make_unique<PinnedBuffer>(sizeof(float));
  const auto wbytes = static_cast<std::size_t>(profiler::weight_bytes(s.cfg.embedding_precision));
  s.emb_weights = s.alloc(sz(s.layout.total_weight_elements) * wbytes);
  if (s.cfg.embedding_optimizer == EmbeddingOptimizer::kRowwiseAdagrad) s.rowwise_state = s.alloc_f(s.layout.total_rows);
  s.tables = static_cast<profiler::EmbeddingTableMeta*>(s.alloc(s.layout.tables.size() * sizeof(profiler::EmbeddingTableMeta)));
  s.emb_workspace_bytes = profiler::kernels::embedding_bag_backward_workspace_bytes(std::max<std::int64_t>(s.opt.max_indices, 1));
  s.emb_workspace = s.alloc(s.emb_workspace_bytes);
  s.build_layers(model, reinterpret_cast<float*>(s.batch_dev + s.bl.dense));
  s.upload(model);
}

DeviceDlrm::~DeviceDlrm() = default;

int DeviceDlrm::add_batch(const DlrmBatch& batch) {
  auto& s = *impl_;
  if (batch.dense.size() != sz(s.B * s.cfg.dense_features()) || batch.labels.size() != sz(s.B)) {
    throw std::invalid_argument("DeviceDlrm::add_batch: dense or label count does not match the config");
  }
  profiler::validate_embedding_bag_batch(s.layout, batch.indices, batch.offsets);
  const auto n = static_cast<std::int64_t>(batch.indices.size());
  if (n > s.opt.max_indices) {
    throw std::invalid_argument(fmt::format("DeviceDlrm::add_batch: {} indices, capacity {}", n, s.opt.max_indices));
  }
  Staged st;
  st.num_indices = n;
  st.host = std::make_unique<PinnedBuffer>(s.bl.fixed_bytes + sz(n) * 8);
  unsigned char* h = st.host->data();
  std::memset(h, 0, s.bl.fixed_bytes);
  std::memcpy(h + s.bl.offsets, batch.offsets.data(), batch.offsets.size() * 8);
  std::memcpy(h + s.bl.dense, batch.dense.data(), batch.dense.size() * 4);
  std::memcpy(h + s.bl.labels, batch.labels.data(), batch.labels.size() * 4);
  if (n > 0) std::memcpy(h + s.bl.indices, batch.indices.data(), sz(n) * 8);
  s.staged.push_back(std::move(st));
  return static_cast<int>(s.staged.size()) - 1;
}

void DeviceDlrm::Impl::forward_backward_update(const Staged& st) {
  cudaStream_t cs = compute;
  void* ws = lt_workspace.get();
  // H2D copy of the batch on the copy stream, after the previous step (ev_start on compute).
  PERFCAST_CUDA_CHECK(cudaStreamWaitEvent(copy, ev_start, 0));
  PERFCAST_CUDA_CHECK(cudaMemcpyAsync(batch_dev, st.host->data(), st.host->bytes(), cudaMemcpyHostToDevice, copy));
  PERFCAST_CUDA_CHECK(cudaEventRecord(ev_copied, copy));
  PERFCAST_CUDA_CHECK(cudaStreamWaitEvent(cs, ev_copied, 0));

  // ---- forward ----
  for (const auto& l : bottom) l.fwd->run(ws, cs);
  auto eb = profiler::kernels::make_device_batch(layout, cfg.embedding_precision, profiler::PoolingMode::kSum,
                                                 st.num_indices);
  eb.tables = tables;
  eb.indices = reinterpret_cast<const std::int64_t*>(batch_dev + bl.indices);
  eb.offsets = reinterpret_cast<const std::int64_t*>(batch_dev + bl.offsets);
  profiler::kernels::launch_embedding_bag_forward(eb, emb_weights, pooled, cs);
  const float* bottom_out = bottom_act.back();
  if (cfg.interaction == Interaction::kDot) {
    kernels::launch_concat_rows(bottom_out, d, pooled, T * d, features, B, cs);
    z_gemm->run(ws, cs);
    kernels::launch_interaction_gather(bottom_out, d, z, nf, top_act[0], B, cs);
  } else {
    kernels::launch_concat_rows(bottom_out, d, pooled, layout.total_dim, top_act[0], B, cs);
  }
  for (const auto& l : top) l.fwd->run(ws, cs);
  const float* labels = reinterpret_cast<const float*>(batch_dev + bl.labels);
  kernels::launch_bce_with_logits(top_act.back(), labels, B, loss_dev, dlogits, cs);

  // ---- backward (autograd order: top MLP, interaction, embeddings, bottom MLP) ----
  const auto layer_backward = [&](const DeviceLayer& l, float* y, float* dy) {
    if (l.relu) kernels::launch_relu_backward(dy, y, B * l.out, cs);
    l.wgrad->run(ws, cs);
    kernels::launch_bias_grad(dy, B, l.out, grads + l.offset + sz(l.in * l.out), cs);
    if (l.dgrad) l.dgrad->run(ws, cs);
  };
  for (std::size_t l = top.size(); l-- > 0;) layer_backward(top[l], top_act[l + 1], dtop_act[l + 1]);
  float* dbottom_out = dbottom_act.back();
  if (cfg.interaction == Interaction::kDot) {
    kernels::launch_interaction_scatter(dtop_act[0], d, nf, s, B, cs);
    df_gemm->run(ws, cs);
    kernels::launch_split_rows(dfeatures, d, T * d, dbottom_out, dtop_act[0], W, dpooled, B, cs);
  } else {
    kernels::launch_split_rows(dtop_act[0], d, layout.total_dim, dbottom_out, nullptr, 0, dpooled, B, cs);
  }
  profiler::OptimizerConfig eo;
  eo.kind = cfg.embedding_optimizer == EmbeddingOptimizer::kRowwiseAdagrad ? profiler::OptimizerKind::kRowwiseAdagrad
                                                                            : profiler::OptimizerKind::kSgd;
  eo.learning_rate = cfg.hyper.embedding_lr;
  eo.eps = cfg.hyper.adagrad_eps;
  profiler::kernels::launch_embedding_bag_backward_update(eb, emb_weights, rowwise_state, dpooled, eo, emb_workspace,
                                                          emb_workspace_bytes, cs);
  for (std::size_t l = bottom.size(); l-- > 0;) layer_backward(bottom[l], bottom_act[l + 1], dbottom_act[l + 1]);

  // ---- dense optimizer (one fused kernel over all MLP parameters) ----
  const auto& h = cfg.hyper;
  if (cfg.dense_optimizer == DenseOptimizer::kSgd) {
    kernels::launch_sgd(params, grads, num_params, h.dense_lr, cs);
  } else {
    adam_step += 1;
    const auto t = static_cast<double>(adam_step);
    const auto c1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(h.adam_beta1), t)));
    const auto c2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(h.adam_beta2), t)));
    kernels::launch_adam(params, grads, adam_m, adam_v, num_params, h.adam_lr, h.adam_beta1, h.adam_beta2, h.adam_eps,
                         c1, c2, cs);
  }
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
  model.embeddings = profiler::HostEmbeddingWeights(s.cfg.embedding_precision, s.layout.total_weight_elements);
  PERFCAST_CUDA_CHECK(cudaMemcpy(model.embeddings.data(), s.emb_weights, model.embeddings.size_bytes(), cudaMemcpyDeviceToHost));
  model.rowwise_state.assign(sz(s.layout.total_rows), 0.0f);
  if (s.rowwise_state) {
    PERFCAST_CUDA_CHECK(cudaMemcpy(model.rowwise_state.data(), s.rowwise_state,
                                   model.rowwise_state.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }
}

std::size_t DeviceDlrm::device_bytes() const { return impl_->total_bytes; }

}  // namespace perfcast::validation
