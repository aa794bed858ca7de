#include "profiler/bench_runner.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <stdexcept>

#include <fmt/format.h>

#include "perfcast/build_info.hpp"
#include "profiler/cuda_error.hpp"
#include "profiler/device_info.hpp"

#if PERFCAST_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cmath>
#include <optional>

#include "profiler/activity_records.hpp"
#include "profiler/bench_gemm.hpp"
#include "profiler/bench_kernels.hpp"
#include "profiler/cuda_check.hpp"
#include "profiler/device_buffer.hpp"
#include "profiler/cupti_tracer.hpp"
#include "profiler/embedding_bag_layout.hpp"
#include "profiler/kernels/embedding_bag.hpp"
#include "profiler/trace_measurements.hpp"
#endif

namespace perfcast::profiler {

namespace {

void progress_line(std::size_t done, std::size_t total, const std::string& label) {
  constexpr int kWidth = 30;
  const int filled = total ? static_cast<int>(kWidth * done / total) : kWidth;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  std::fprintf(stderr, "\r[%s] %zu/%zu %-60.60s", bar.c_str(), done, total, label.c_str());
  std::fflush(stderr);
}

}  // namespace

#if PERFCAST_HAVE_CUDA

namespace {

/// Owning device allocation.
/// Owning host allocation, page-locked or not.
struct HostBuffer {
  void* p = nullptr;
  bool pinned = false;
  HostBuffer(std::size_t bytes, bool pin) : pinned(pin) {
    if (pin) {
      PERFCAST_CUDA_CHECK(cudaMallocHost(&p, bytes == 0 ? 1 : bytes));
    } else {
      p = std::malloc(bytes == 0 ? 1 : bytes);
      if (!p) throw std::bad_alloc();
      std::memset(p, 1, bytes);  // touch the pages so the first copy does not fault them in
    }
  }
  ~HostBuffer() {
    if (pinned) {
      cudaFreeHost(p);
    } else {
      std::free(p);
    }
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
};

std::string version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

}  // namespace

struct BenchRunner::Impl {
  int device = 0;
  DeviceInfo info;
  DeviceFingerprint fingerprint;
  cudaStream_t stream = nullptr;
  std::unique_ptr<DeviceBuffer> flush;
  std::size_t flush_bytes = 0;
  std::unique_ptr<CuptiTracer> tracer;
  std::string timer = "cuda_events";
  std::string cupti_error;
  std::unique_ptr<bench::CublasLt> lt;
  std::uint64_t next_external_id = 1;
  cudaEvent_t ev_start = nullptr, ev_stop = nullptr;

  ~Impl() {
    tracer.reset();
    if (ev_start) cudaEventDestroy(ev_start);
    if (ev_stop) cudaEventDestroy(ev_stop);
    flush.reset();
    lt.reset();
    if (stream) cudaStreamDestroy(stream);
  }

  /// Times `work` (enqueues one run on `stream`); returns the timing and the longest kernel's name.
  std::pair<TimingStats, std::string> time(const std::function<void()>& work, const SweepSettings& s) {
    for (int i = 0; i < s.warmup; ++i) work();
    PERFCAST_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (tracer) (void)tracer->take();  // drop warm-up records
    std::vector<Seconds> event_times;
    const std::uint64_t first = next_external_id;
    next_external_id += static_cast<std::uint64_t>(s.repetitions);
    for (int r = 0; r < s.repetitions; ++r) {
      if (s.flush_l2) {
        PERFCAST_CUDA_CHECK(cudaMemsetAsync(flush->get(), r & 0xff, flush_bytes, stream));
      }
      if (tracer) {
        tracer->push_external_id(first + static_cast<std::uint64_t>(r));
        work();
        tracer->pop_external_id();
      } else {
        PERFCAST_CUDA_CHECK(cudaEventRecord(ev_start, stream));
        work();
        PERFCAST_CUDA_CHECK(cudaEventRecord(ev_stop, stream));
        PERFCAST_CUDA_CHECK(cudaEventSynchronize(ev_stop));
        float ms = 0;
        PERFCAST_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_start, ev_stop));
        event_times.push_back(static_cast<double>(ms) * 1e-3);
      }
    }
    PERFCAST_CUDA_CHECK(cudaStreamSynchronize(stream));
    PERFCAST_CUDA_CHECK(cudaGetLastError());
    if (!tracer) return {timing_stats(event_times, "cuda_events"), ""};
    const auto result = correlate(tracer->take());
    const auto reps = repetition_times(result, first, static_cast<std::uint64_t>(s.repetitions),
                                       {GpuOpKind::kKernel, GpuOpKind::kMemcpy, GpuOpKind::kMemset});
    if (reps.empty()) {
      throw std::runtime_error(fmt::format("CUPTI delivered no records for the timed runs ({} dropped)",
                                           result.dropped_records));
    }
    std::string name;
    for (const auto& r : reps) {
      if (!r.longest_kernel.empty()) {
        name = r.longest_kernel;
        break;
      }
    }
    return {repetition_stats(reps, "cupti"), name};
  }
};

BenchRunner::BenchRunner(int device, bool use_cupti) : impl_(std::make_unique<Impl>()) {
  auto& s = *impl_;
  s.info = query_device_info(device);  // throws NoCudaDeviceError / out_of_range
  s.device = device;
  PERFCAST_CUDA_CHECK(cudaSetDevice(device));
  PERFCAST_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  PERFCAST_CUDA_CHECK(cudaEventCreate(&s.ev_start));
  PERFCAST_CUDA_CHECK(cudaEventCreate(&s.ev_stop));
  s.flush_bytes = 2 * static_cast<std::size_t>(s.info.l2_cache_bytes > 0 ? s.info.l2_cache_bytes : (50 << 20));
  s.flush = std::make_unique<DeviceBuffer>(s.flush_bytes);
  s.fingerprint.name = s.info.name;
  s.fingerprint.sm_count = s.info.sm_count;
  s.fingerprint.sm_clock = s.info.sm_clock_khz * 1e3;
  s.fingerprint.memory_clock = s.info.memory_clock_khz * 1e3;
  s.fingerprint.driver = version_string(s.info.driver_version);  // CUDA version the driver supports
  s.fingerprint.cuda_runtime = version_string(s.info.runtime_version);
  if (use_cupti) {
    try {
      s.tracer = std::make_unique<CuptiTracer>();
      s.timer = "cupti";
    } catch (const TracerUnavailable& e) {
      s.cupti_error = e.what();
    }
  } else {
    s.cupti_error = "disabled (--no-cupti)";
  }
}

BenchRunner::~BenchRunner() = default;

const std::string& BenchRunner::timer() const { return impl_->timer; }
const std::string& BenchRunner::cupti_error() const { return impl_->cupti_error; }
const DeviceFingerprint& BenchRunner::device() const { return impl_->fingerprint; }

Measurement BenchRunner::measure(const BenchCase& c, const SweepSettings& settings) {
  auto& s = *impl_;
  void* stream = s.stream;
  Measurement m;
  m.kernel = c.kernel;
  m.device = s.fingerprint;
  m.date = utc_timestamp();
  m.commit = build_info::kGitCommit;
  std::pair<TimingStats, std::string> t;

  if (const auto* g = std::get_if<GemmDesc>(&c.kernel)) {
    if (!s.lt) s.lt = std::make_unique<bench::CublasLt>();
    m.device.cublas = bench::CublasLt::version();
    bench::GemmCase gc(*s.lt, *g, c.trans_a, c.trans_b, stream);
    t = s.time([&] { gc.launch(stream); }, settings);
  } else if (const auto* e = std::get_if<ElementwiseDesc>(&c.kernel)) {
    const auto n = e->elements;
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
    DeviceBuffer a(bytes), b(e->op == "bias_grad" ? 4 : bytes), out(e->op == "bias_grad" ? static_cast<std::size_t>(c.bias_cols) * 4 : bytes);
    const bool bce = e->op == "bce";
    bench::launch_fill_uniform_f32(a.as<float>(), n, 1, bce ? 0.01f : -2.f, bce ? 0.99f : 2.f, stream);
    if (e->op != "bias_grad") bench::launch_fill_uniform_f32(b.as<float>(), n, 2, 0.f, 1.f, stream);
    if (e->op == "bias_grad") {
      if (c.bias_cols <= 0 || n % c.bias_cols != 0) throw std::invalid_argument("bias_grad: elements must be whole rows");
      t = s.time([&] { bench::launch_bias_grad(a.as<float>(), n / c.bias_cols, c.bias_cols, out.as<float>(), stream); },
                 settings);
    } else {
      t = s.time([&] { bench::launch_elementwise(e->op.c_str(), n, a.as<float>(), b.as<float>(), out.as<float>(), stream); },
                 settings);
    }
  } else if (const auto* mc = std::get_if<MemcpyDesc>(&c.kernel)) {
    const auto bytes = static_cast<std::size_t>(mc->bytes);
    DeviceBuffer dst(bytes);
    if (mc->kind == CopyKind::kDeviceToDevice) {
      DeviceBuffer src(bytes);
      PERFCAST_CUDA_CHECK(cudaMemsetAsync(src.get(), 1, bytes, s.stream));
      t = s.time([&] { PERFCAST_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s.stream)); },
                 settings);
    } else {
      HostBuffer host(bytes, c.pinned);
      const bool h2d = mc->kind == CopyKind::kHostToDevice;
      t = s.time([&] {
        PERFCAST_CUDA_CHECK(cudaMemcpyAsync(h2d ? dst.get() : host.p, h2d ? host.p : dst.get(), bytes,
                                            h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s.stream));
      }, settings);
    }
  } else if (const auto* eb = std::get_if<EmbeddingDesc>(&c.kernel)) {
    if (eb->weight_dtype != DType::kFp32 && eb->weight_dtype != DType::kFp16 && eb->weight_dtype != DType::kBf16) {
      throw std::invalid_argument("embedding: weights must be fp32, fp16 or bf16");
    }
    const WeightPrecision prec = eb->weight_dtype == DType::kFp32   ? WeightPrecision::kFp32
                                 : eb->weight_dtype == DType::kFp16 ? WeightPrecision::kFp16
                                                                    : WeightPrecision::kBf16;
    std::vector<TableShape> shapes;
    for (const auto& tb : eb->tables) shapes.push_back(TableShape{tb.rows, static_cast<std::int32_t>(tb.dim)});
    const auto layout = make_embedding_bag_layout(shapes, eb->batch);
    // Fixed pooling per table (round(pooling) indices in every bag), offsets table-major.
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(layout.num_bags()) + 1);
    std::int64_t pos = 0;
    std::vector<std::int64_t> table_start;
    for (std::size_t ti = 0; ti < eb->tables.size(); ++ti) {
      const auto l = static_cast<std::int64_t>(std::llround(eb->tables[ti].pooling));
      table_start.push_back(pos);
      for (std::int64_t bag = 0; bag < eb->batch; ++bag) {
        offsets[ti * static_cast<std::size_t>(eb->batch) + static_cast<std::size_t>(bag)] = pos;
        pos += l;
      }
    }
    offsets.back() = pos;
    const std::int64_t num_indices = pos;
    DeviceBuffer weights(static_cast<std::size_t>(layout.total_weight_elements) * static_cast<std::size_t>(weight_bytes(prec)));
    DeviceBuffer indices(static_cast<std::size_t>(num_indices) * 8), offs(offsets.size() * 8);
    DeviceBuffer metas(layout.tables.size() * sizeof(EmbeddingTableMeta));
    DeviceBuffer output(static_cast<std::size_t>(eb->batch) * static_cast<std::size_t>(layout.total_dim) * 4);
    if (prec == WeightPrecision::kFp32) {
      bench::launch_fill_uniform_f32(weights.as<float>(), layout.total_weight_elements, 3, -0.1f, 0.1f, stream);
    } else {
      bench::launch_fill_uniform_16(weights.get(), layout.total_weight_elements, 3, -0.1f, 0.1f, prec == WeightPrecision::kBf16, stream);
    }
    for (std::size_t ti = 0; ti < eb->tables.size(); ++ti) {
      const auto& tb = eb->tables[ti];
      bench::IndexGenParams p;
      p.kind = tb.distribution.kind == IndexDistribution::Kind::kZipf ? 1 : tb.distribution.kind == IndexDistribution::Kind::kHotSet ? 2 : 0;
      p.alpha = tb.distribution.alpha;
      p.hot_rows_fraction = tb.distribution.hot_rows_fraction;
      p.hot_access_fraction = tb.distribution.hot_access_fraction;
      const std::int64_t n = (ti + 1 < eb->tables.size() ? table_start[ti + 1] : num_indices) - table_start[ti];
      bench::launch_generate_indices(indices.as<std::int64_t>() + table_start[ti], n, tb.rows, p, 100 + ti, stream);
    }
    PERFCAST_CUDA_CHECK(cudaMemcpyAsync(offs.get(), offsets.data(), offsets.size() * 8, cudaMemcpyHostToDevice, s.stream));
    PERFCAST_CUDA_CHECK(cudaMemcpyAsync(metas.get(), layout.tables.data(), layout.tables.size() * sizeof(EmbeddingTableMeta),
                                        cudaMemcpyHostToDevice, s.stream));
    PERFCAST_CUDA_CHECK(cudaStreamSynchronize(s.stream));  // host vectors die at scope end
    auto batch = kernels::make_device_batch(layout, prec, PoolingMode::kSum, num_indices);
    batch.tables = metas.as<EmbeddingTableMeta>();
    batch.indices = indices.as<std::int64_t>();
    batch.offsets = offs.as<std::int64_t>();
    if (eb->pass == EmbeddingPass::kForward) {
      t = s.time([&] { kernels::launch_embedding_bag_forward(batch, weights.get(), output.as<float>(), stream); }, settings);
    } else {
      if (eb->optimizer != EmbeddingOptimizer::kSgd && eb->optimizer != EmbeddingOptimizer::kRowwiseAdagrad) {
        throw std::invalid_argument("embedding backward: only SGD and row-wise Adagrad are implemented");
      }
      OptimizerConfig opt;
      opt.kind = eb->optimizer == EmbeddingOptimizer::kSgd ? OptimizerKind::kSgd : OptimizerKind::kRowwiseAdagrad;
      std::optional<DeviceBuffer> state;
      if (opt.kind == OptimizerKind::kRowwiseAdagrad) {
        state.emplace(static_cast<std::size_t>(layout.total_rows) * 4);
        PERFCAST_CUDA_CHECK(cudaMemsetAsync(state->get(), 0, static_cast<std::size_t>(layout.total_rows) * 4, s.stream));
      }
      bench::launch_fill_uniform_f32(output.as<float>(), eb->batch * layout.total_dim, 4, -1.f, 1.f, stream);
      const std::size_t ws = kernels::embedding_bag_backward_workspace_bytes(num_indices);
      DeviceBuffer workspace(ws);
      t = s.time([&] {
        kernels::launch_embedding_bag_backward_update(batch, weights.get(), state ? state->as<float>() : nullptr,
                                                      output.as<float>(), opt, workspace.get(), ws, stream);
      }, settings);
    }
  } else {
    throw std::invalid_argument("cannot benchmark " + kernel_family(c.kernel) + " descriptors");
  }
  m.timing = std::move(t.first);
  m.kernel_name = std::move(t.second);
  return m;
}

ProfileSummary run_sweeps(const std::vector<Sweep>& sweeps, const ProfileOptions& options,
                          const std::function<void(const Measurement&)>& out) {
  const auto t0 = std::chrono::steady_clock::now();
  BenchRunner runner(options.device, options.use_cupti);
  ProfileSummary summary;
  summary.timer = runner.timer();
  summary.cupti_error = runner.cupti_error();
  std::size_t total = 0;
  for (const auto& s : sweeps) total += s.cases.size();
  const std::size_t begin = std::min(options.offset, total);
  const std::size_t end = options.limit ? std::min(total, begin + options.limit) : total;
  summary.not_run = total - (end - begin);
  const bool bar = options.progress && isatty(STDERR_FILENO);
  std::size_t index = 0;
  for (const auto& sweep : sweeps) {
    for (const auto& c : sweep.cases) {
      const std::size_t i = index++;
      if (i < begin || i >= end) continue;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (options.time_budget_s > 0 && elapsed > options.time_budget_s) {
        ++summary.not_run;
        continue;
      }
      const std::string label = case_label(c);
      if (bar) progress_line(i - begin, end - begin, label);
      try {
        out(runner.measure(c, sweep.settings));
        ++summary.measured;
      } catch (const std::exception& e) {
        ++summary.failed;
        if (summary.failures.size() < 20) summary.failures.push_back(label + ": " + e.what());
        cudaGetLastError();  // clear a non-sticky error (e.g. out of memory) before the next case
      }
    }
  }
  if (bar) {
    progress_line(end - begin, end - begin, "done");
    std::fprintf(stderr, "\n");
  }
  return summary;
}

#else  // !PERFCAST_HAVE_CUDA

struct BenchRunner::Impl {
  std::string timer, error;
  DeviceFingerprint device;
};

BenchRunner::BenchRunner(int, bool) { throw NoCudaDeviceError("this build has no CUDA"); }
BenchRunner::~BenchRunner() = default;
Measurement BenchRunner::measure(const BenchCase&, const SweepSettings&) { throw NoCudaDeviceError("this build has no CUDA"); }
const std::string& BenchRunner::timer() const { return impl_->timer; }
const std::string& BenchRunner::cupti_error() const { return impl_->error; }
const DeviceFingerprint& BenchRunner::device() const { return impl_->device; }

ProfileSummary run_sweeps(const std::vector<Sweep>&, const ProfileOptions&, const std::function<void(const Measurement&)>&) {
  (void)&progress_line;
  throw NoCudaDeviceError("this build has no CUDA");
}

#endif

}  // namespace perfcast::profiler
