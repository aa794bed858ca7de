#include "profiler/cupti_tracer.hpp"

#if PERFCAST_HAVE_CUDA
#include <cxxabi.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <cuda.h>
#include <cupti.h>

#endif

namespace perfcast::profiler {

#if PERFCAST_HAVE_CUDA

namespace {

/// CUPTI requires activity buffers aligned to 8 bytes (ALIGN_SIZE in CUPTI's samples).
constexpr std::size_t kBufferAlign = 8;

/// Process-wide state: CUPTI's buffer callbacks are plain functions without a user pointer.
struct Global {
  std::mutex mu;
  ActivitySink* sink = nullptr;  ///< the live tracer's sink (nullptr: none; records are discarded)
  std::size_t buffer_bytes = 8u << 20;
  std::unordered_map<const char*, std::string> names;  ///< demangled kernel names by CUPTI's pointer
  /// Runtime calls already come from callbacks: drop RUNTIME activity records (same ids).
  bool skip_runtime_activity = false;
};
Global& global() {
  static Global g;
  return g;
}
std::atomic<bool> g_live{false};

std::string check_msg(CUptiResult r, const char* call) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return std::string(call) + ": " + (s ? s : "unknown CUPTI error");
}

#define PERFCAST_CUPTI_TRY(call)                                        \
  do {                                                                  \
    const CUptiResult perfcast_r_ = (call);                             \
    if (perfcast_r_ != CUPTI_SUCCESS) throw TracerUnavailable(check_msg(perfcast_r_, #call)); \
  } while (0)

/// Kernel name for humans: demangled when it is a C++ symbol (cached; CUPTI's name pointers
/// stay valid and unique per function for the process lifetime). Called with global().mu held.
const std::string& kernel_name(const char* mangled) {
  auto& names = global().names;
  if (auto it = names.find(mangled); it != names.end()) return it->second;
  std::string out = mangled ? mangled : "<unknown>";
  if (mangled && std::strncmp(mangled, "_Z", 2) == 0) {
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    if (status == 0 && d) out = d;
    std::free(d);
  }
  return names.emplace(mangled, std::move(out)).first->second;
}

MemcpyDirection direction_of(std::uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return MemcpyDirection::kHostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return MemcpyDirection::kDeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return MemcpyDirection::kDeviceToDevice;
    default: return MemcpyDirection::kOther;
  }
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  const std::size_t bytes = global().buffer_bytes;
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlign, bytes));
  *size = *buffer ? bytes : 0;  // a 0-byte buffer makes CUPTI drop (and count) the records
  *max_records = 0;             // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, std::uint32_t stream_id, std::uint8_t* buffer, std::size_t /*size*/,
                               std::size_t valid_size) {
  std::lock_guard lock(global().mu);
  ActivitySink* sink = global().sink;
  CUpti_Activity* record = nullptr;
  while (sink && cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        GpuActivity a;
        a.kind = GpuOpKind::kKernel;
        a.correlation_id = k->correlationId;
        a.name = kernel_name(k->name);
        a.start_ns = k->start;
        a.end_ns = k->end;
        a.device = k->deviceId;
        a.stream = k->streamId;
        a.grid[0] = k->gridX, a.grid[1] = k->gridY, a.grid[2] = k->gridZ;
        a.block[0] = k->blockX, a.block[1] = k->blockY, a.block[2] = k->blockZ;
        sink->add_gpu(std::move(a));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        GpuActivity a;
        a.kind = GpuOpKind::kMemcpy;
        a.correlation_id = m->correlationId;
        a.direction = direction_of(m->copyKind);
        a.name = std::string("memcpy ") + direction_name(a.direction);
        a.start_ns = m->start;
        a.end_ns = m->end;
        a.device = m->deviceId;
        a.stream = m->streamId;
        a.bytes = m->bytes;
        sink->add_gpu(std::move(a));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        GpuActivity a;
        a.kind = GpuOpKind::kMemset;
        a.correlation_id = m->correlationId;
        a.name = "memset";
        a.start_ns = m->start;
        a.end_ns = m->end;
        a.device = m->deviceId;
        a.stream = m->streamId;
        a.bytes = m->bytes;
        sink->add_gpu(std::move(a));
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        if (runtime && global().skip_runtime_activity) break;
        const auto* r = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        ApiCall c;
        c.correlation_id = r->correlationId;
        c.cbid = r->cbid;
        const char* fn = nullptr;
        if (cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, r->cbid, &fn) ==
                CUPTI_SUCCESS && fn) {
          c.function = strip_api_version(fn);  // "cudaLaunchKernel_v7000" -> "cudaLaunchKernel"
        }
        c.start_ns = r->start;
        c.end_ns = r->end;
        c.thread_id = r->threadId;
        sink->add_api(std::move(c));
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        sink->add_external(ExternalCorrelation{e->correlationId, e->externalId});
        break;
      }
      default: break;
    }
  }
  std::size_t dropped = 0;
  if (sink && cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    sink->add_dropped(dropped);
  }
  std::free(buffer);
}

/// Runtime API callback: host enter/exit timestamps of every call on the application thread.
/// The enter timestamp rides in CUPTI's per-call correlationData slot.
void CUPTIAPI api_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  std::uint64_t now = 0;
  cuptiGetTimestamp(&now);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    *cb->correlationData = now;
    return;
  }
  auto* sink = static_cast<ActivitySink*>(userdata);
  ApiCall c;
  c.correlation_id = cb->correlationId;
  c.cbid = cbid;
  c.function = strip_api_version(cb->functionName ? cb->functionName : "");
  if (!is_launch_function(c.function)) return;  // keep memory bounded: only calls that enqueue GPU work
  c.start_ns = *cb->correlationData;
  c.end_ns = now;
  sink->add_api(std::move(c));
}

}  // namespace

struct CuptiTracer::Impl {
  TracerOptions options;
  ActivitySink sink;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::vector<CUpti_ActivityKind> enabled;

  void shutdown() noexcept {
    for (auto k : enabled) cuptiActivityDisable(k);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (subscriber) cuptiUnsubscribe(subscriber);
    subscriber = nullptr;
    enabled.clear();
    std::lock_guard lock(global().mu);
    global().sink = nullptr;
  }
};

CuptiTracer::CuptiTracer(TracerOptions options) : impl_(std::make_unique<Impl>()) {
  bool expected = false;
  if (!g_live.compare_exchange_strong(expected, true)) throw TracerUnavailable("another CuptiTracer is active");
  impl_->options = options;
  try {
    {
      std::lock_guard lock(global().mu);
      global().sink = &impl_->sink;
      global().buffer_bytes = options.buffer_bytes;
    }
    PERFCAST_CUPTI_TRY(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    auto enable = [&](CUpti_ActivityKind k) {
      PERFCAST_CUPTI_TRY(cuptiActivityEnable(k));
      impl_->enabled.push_back(k);
    };
    if (options.kernels) enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (options.memcpy) enable(CUPTI_ACTIVITY_KIND_MEMCPY);
    if (options.memset) enable(CUPTI_ACTIVITY_KIND_MEMSET);
    if (options.external_correlation) enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    bool have_callbacks = false;
    if (options.runtime_callbacks &&
        cuptiSubscribe(&impl_->subscriber, reinterpret_cast<CUpti_CallbackFunc>(api_callback), &impl_->sink) ==
            CUPTI_SUCCESS) {
      if (cuptiEnableDomain(1, impl_->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API) == CUPTI_SUCCESS) {
        have_callbacks = true;
      } else {
        cuptiUnsubscribe(impl_->subscriber);
        impl_->subscriber = nullptr;
      }
    }
    // External correlation records are emitted only in front of API activity records, so
    // external ids need RUNTIME and DRIVER activity (cuBLAS may launch through the driver API).
    // Without a subscriber (another tool holds it), runtime activity records also give the host
    // start/end of every call; with one, they duplicate the callbacks and are dropped.
    {
      std::lock_guard lock(global().mu);
      global().skip_runtime_activity = have_callbacks;
    }
    if (!have_callbacks || options.external_correlation) enable(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (options.external_correlation) enable(CUPTI_ACTIVITY_KIND_DRIVER);
  } catch (...) {
    impl_->shutdown();
    g_live = false;
    throw;
  }
}

CuptiTracer::~CuptiTracer() {
  impl_->shutdown();
  g_live = false;
}

void CuptiTracer::flush() { cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); }

ActivityBatch CuptiTracer::take() {
  flush();
  return impl_->sink.take();
}

void CuptiTracer::push_external_id(std::uint64_t id) {
  cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void CuptiTracer::pop_external_id() {
  std::uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

bool CuptiTracer::built() noexcept { return true; }

#else  // !PERFCAST_HAVE_CUDA

struct CuptiTracer::Impl {};

CuptiTracer::CuptiTracer(TracerOptions) { throw TracerUnavailable("this build has no CUDA"); }
CuptiTracer::~CuptiTracer() = default;
void CuptiTracer::flush() {}
ActivityBatch CuptiTracer::take() { return {}; }
void CuptiTracer::push_external_id(std::uint64_t) {}
void CuptiTracer::pop_external_id() {}
bool CuptiTracer::built() noexcept { return false; }

#endif

}  // namespace perfcast::profiler
