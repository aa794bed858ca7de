#include "model/traces/kineto_trace.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <functional>
#include <limits>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/traces/trace_input.hpp"
#include "core/json_reader.hpp"
#include "core/limits.hpp"
#include "core/json_text.hpp"

namespace perfcast {
namespace {

using nlohmann::json;

constexpr double kUs = 1e-6;  // Kineto writes ts and dur in microseconds

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

enum class Category { kOther, kCpuOp, kAnnotation, kRuntime, kKernel, kMemcpy, kMemset };

/// Event categories of current Kineto ("cpu_op", "cuda_runtime", "kernel", ...) and of
/// the PyTorch 1.8-era traces ("Operator", "Runtime", "Kernel", "Memcpy", "Memset").
Category category_of(const std::string& cat) {
  const std::string c = lower(cat);
  if (c == "cpu_op" || c == "operator") return Category::kCpuOp;
  if (c == "user_annotation") return Category::kAnnotation;
  if (c == "cuda_runtime" || c == "cuda_driver" || c == "runtime") return Category::kRuntime;
  if (c == "kernel") return Category::kKernel;
  if (c == "gpu_memcpy" || c == "memcpy") return Category::kMemcpy;
  if (c == "gpu_memset" || c == "memset") return Category::kMemset;
  return Category::kOther;
}

/// Bounds on event fields (core/limits.hpp states the integer bound): `ts` is absolute
/// epoch microseconds (1.7e15 in 2024) and `dur` at most 1e13 us (116 days), so relative
/// times and their sums stay finite.
constexpr double kMaxAbsTimestampUs = 1e18;
constexpr double kMaxDurationUs = 1e13;

/// An integral JSON number within +-limits::kMaxTraceInteger (an integer, or a double
/// without fraction), or nullopt.
std::optional<std::int64_t> trace_integer(const json& v) {
  constexpr auto kMax = limits::kMaxTraceInteger;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    return u <= static_cast<std::uint64_t>(kMax) ? std::optional<std::int64_t>(static_cast<std::int64_t>(u)) : std::nullopt;
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    return i >= -kMax && i <= kMax ? std::optional<std::int64_t>(i) : std::nullopt;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::floor(d) != d || std::fabs(d) > static_cast<double>(kMax)) return std::nullopt;
    return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

/// Reads fields of one event and names the event's JSON pointer in errors.
class EventReader {
 public:
  EventReader(const json& e, const std::string& file, std::size_t index)
      : e_(e), file_(file), pointer_(fmt::format("/traceEvents/{}", index)) {}

  [[noreturn]] void fail(std::string_view key, const std::string& message) const {
    throw ConfigError(file_, key.empty() ? pointer_ : pointer_ + "/" + std::string(key), message);
  }
  /// A number with |value| <= max_abs.
  [[nodiscard]] double number(const char* key, double max_abs) const {
    const auto it = e_.find(key);
    if (it == e_.end()) fail(key, "missing required key");
    if (!it->is_number()) fail(key, fmt::format("expected a number, got {}", it->type_name()));
    const double v = it->get<double>();
    if (!(std::fabs(v) <= max_abs)) fail(key, fmt::format("expected a number within +-{:g}, got {}", max_abs, it->dump()));
    return v;
  }
  [[nodiscard]] std::string string(const char* key) const {
    const auto it = e_.find(key);
    if (it == e_.end() || !it->is_string()) fail(key, "expected a string");
    return it->get<std::string>();
  }
  /// An integer field of the event itself (pid); nullopt when absent or not an integer.
  [[nodiscard]] std::optional<std::int64_t> own_int(const char* key) const {
    const auto it = e_.find(key);
    if (it == e_.end() || !it->is_number_integer()) return std::nullopt;
    const auto v = trace_integer(*it);
    if (!v) fail(key, fmt::format("expected an integer within +-{}, got {}", limits::kMaxTraceInteger, it->dump()));
    return v;
  }
  /// Thread ids are numbers, but some writers use strings; strings are hashed.
  [[nodiscard]] std::int64_t tid() const {
    const auto it = e_.find("tid");
    if (it == e_.end()) return 0;
    if (it->is_number()) {
      const auto v = trace_integer(*it);
      if (!v) fail("tid", fmt::format("expected an integer within +-{}, got {}", limits::kMaxTraceInteger, it->dump()));
      return *v;
    }
    if (it->is_string()) return static_cast<std::int64_t>(std::hash<std::string>{}(it->get<std::string>()) >> 1);
    fail("tid", "expected a number or a string");
  }
  [[nodiscard]] const json* args() const {
    const auto it = e_.find("args");
    return it != e_.end() && it->is_object() ? &*it : nullptr;
  }
  /// An integer argument in [lo, hi]; `required` makes a missing one an error.
  [[nodiscard]] std::optional<std::int64_t> arg_int(const char* key, bool required,
                                                    std::int64_t lo = -limits::kMaxTraceInteger,
                                                    std::int64_t hi = limits::kMaxTraceInteger) const {
    const json* a = args();
    const auto it = a ? a->find(key) : json::const_iterator{};
    if (!a || it == a->end()) {
      if (required) fail(std::string("args/") + key, "missing required key");
      return std::nullopt;
    }
    if (!it->is_number()) fail(std::string("args/") + key, fmt::format("expected a number, got {}", it->type_name()));
    const auto v = trace_integer(*it);
    if (!v || *v < lo || *v > hi)
      fail(std::string("args/") + key, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, it->dump()));
    return v;
  }
  /// A number argument in [0, hi]; nullopt when absent or not a number.
  [[nodiscard]] std::optional<double> arg_number(const char* key, double hi) const {
    const json* a = args();
    const auto it = a ? a->find(key) : json::const_iterator{};
    if (!a || it == a->end() || !it->is_number()) return std::nullopt;
    const double v = it->get<double>();
    if (!(v >= 0 && v <= hi)) fail(std::string("args/") + key, fmt::format("expected a number in [0, {:g}], got {}", hi, it->dump()));
    return v;
  }
  [[nodiscard]] const std::string& pointer() const { return pointer_; }

 private:
  const json& e_;
  const std::string& file_;
  std::string pointer_;
};

/// Kineto "Input Dims": a list per input, each a list of sizes (empty for scalars);
/// sizes that are not integers are left out, sizes outside [0, 2^53) are an error.
std::vector<std::vector<std::int64_t>> read_dims(const EventReader& r) {
  std::vector<std::vector<std::int64_t>> out;
  const json* args = r.args();
  if (!args) return out;
  const auto it = args->find("Input Dims");
  if (it == args->end() || !it->is_array()) return out;
  for (const auto& input : *it) {
    std::vector<std::int64_t> dims;
    if (input.is_array()) {
      for (const auto& d : input) {
        if (!d.is_number_integer()) continue;
        const auto v = trace_integer(d);
        if (!v || *v < 0) r.fail("args/Input Dims", fmt::format("expected sizes in [0, {}], got {}", limits::kMaxTraceInteger, json_text(d)));
        dims.push_back(*v);
      }
    }
    out.push_back(std::move(dims));
  }
  return out;
}

std::vector<std::string> read_types(const json* args) {
  std::vector<std::string> out;
  if (!args) return out;
  const auto it = args->find("Input type");
  if (it == args->end() || !it->is_array()) return out;
  for (const auto& t : *it) out.push_back(t.is_string() ? t.get<std::string>() : std::string());
  return out;
}

/// N of "ProfilerStep#N"; nullopt for other names. N above limits::kMaxTraceInteger is
/// an error (it would overflow the step arithmetic).
std::optional<std::int64_t> step_number(const std::string& name, const EventReader& r) {
  static constexpr std::string_view kPrefix = "ProfilerStep#";
  if (!starts_with(name, kPrefix) || name.size() == kPrefix.size()) return std::nullopt;
  std::int64_t n = 0;
  for (std::size_t i = kPrefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
    if (n > (limits::kMaxTraceInteger - 9) / 10)
      r.fail("name", fmt::format("step number in \"{}\" is larger than {}", name, limits::kMaxTraceInteger));
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

/// Raw events before times are made relative.
struct RawSpan {
  double ts_us = 0, dur_us = 0;
};

/// NCCL collective described on the kernel itself (PyTorch >= 2.1 writes "Collective
/// name", "In msg nelems", "Group size" and "dtype" into the kernel's args).
std::optional<TraceCollective> collective_from_kernel_args(const EventReader& r) {
  const json* args = r.args();
  if (!args) return std::nullopt;
  const auto name = args->find("Collective name");
  if (name == args->end() || !name->is_string()) return std::nullopt;
  TraceCollective c;
  c.name = name->get<std::string>();
  c.from_kernel_args = true;
  if (const auto k = trace_collective_kind(c.name)) c.kind = *k;
  if (const auto t = args->find("dtype"); t != args->end() && t->is_string()) c.dtype = t->get<std::string>();
  if (const auto n = r.arg_number("In msg nelems", limits::kMaxBytes)) {
    // The bound is on bytes: 2^50 doubles passed the element bound and replayed for days.
    c.bytes = *n * trace_dtype_bytes(c.dtype);
    if (c.bytes > limits::kMaxBytes)
      r.fail("args/In msg nelems", fmt::format("{:g} elements of {} are {:g} bytes, more than the {:g} a message may have",
                                          *n, c.dtype, c.bytes, limits::kMaxBytes));
  }
  if (const auto g = args->find("Group size"); g != args->end() && g->is_number_integer())
    c.group_size = static_cast<int>(*r.arg_int("Group size", true, 0, limits::kMaxRanks));
  return c;
}

/// Fills an NCCL kernel's collective from the `nccl:<name>` annotation that encloses its
/// launch (record_function in ProcessGroupNCCL), with the message size from its Input Dims.
void collective_from_annotation(const KinetoTrace& t, int call, TraceCollective& c) {
  for (int o = call >= 0 ? t.runtime[static_cast<std::size_t>(call)].op : -1; o >= 0;
       o = t.ops[static_cast<std::size_t>(o)].parent) {
    const CpuOp& op = t.ops[static_cast<std::size_t>(o)];
    if (!starts_with(op.name, "nccl:")) continue;
    c.name = op.name.substr(5);
    if (const auto k = trace_collective_kind(c.name)) c.kind = *k;
    if (!op.input_types.empty()) c.dtype = op.input_types[0];
    if (!op.input_dims.empty() && !op.input_dims[0].empty()) {
      double elements = 1;
      for (auto d : op.input_dims[0]) elements = std::min(elements * static_cast<double>(d), 2 * limits::kMaxBytes);
      c.bytes = elements * trace_dtype_bytes(c.dtype);
      if (c.bytes > limits::kMaxBytes) {
        throw ConfigError(t.file, "", fmt::format("the message of \"{}\" (Input Dims of its first input) is larger than {:g} bytes",
                                                  op.name, limits::kMaxBytes));
      }
    }
    return;
  }
}

/// Assigns parents (per thread, by containment) and each runtime call's innermost op:
/// one sweep per thread over ops and calls by start time, with a stack of open ops.
/// At equal start times an op comes before a call (the op encloses the call) and a
/// longer op before a shorter one.
void build_nesting(KinetoTrace& t) {
  std::sort(t.ops.begin(), t.ops.end(), [](const CpuOp& a, const CpuOp& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start != b.start) return a.start < b.start;
    return a.duration > b.duration;
  });
  struct Item {
    std::int64_t tid;
    Seconds start;
    int is_call;  // 0: op, 1: call
    int index;
  };
  std::vector<Item> items;
  items.reserve(t.ops.size() + t.runtime.size());
  for (std::size_t i = 0; i < t.ops.size(); ++i) items.push_back({t.ops[i].tid, t.ops[i].start, 0, static_cast<int>(i)});
  for (std::size_t i = 0; i < t.runtime.size(); ++i)
    items.push_back({t.runtime[i].tid, t.runtime[i].start, 1, static_cast<int>(i)});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start != b.start) return a.start < b.start;
    if (a.is_call != b.is_call) return a.is_call < b.is_call;
    return a.index < b.index;  // ops are already longest-first at equal starts
  });
  std::vector<int> stack;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const Item& it = items[k];
    if (k > 0 && items[k - 1].tid != it.tid) stack.clear();
    while (!stack.empty() && t.ops[static_cast<std::size_t>(stack.back())].end() <= it.start) stack.pop_back();
    const int parent = stack.empty() ? -1 : stack.back();
    if (it.is_call) {
      t.runtime[static_cast<std::size_t>(it.index)].op = parent;
    } else {
      t.ops[static_cast<std::size_t>(it.index)].parent = parent;
      stack.push_back(it.index);
    }
  }
}

int dtype_bytes_impl(const std::string& t) {
  static const std::map<std::string, int, std::less<>> kBytes = {
      // C++ names (record_shapes "Input type") and ATen scalar type names (kernel "dtype").
      {"float", 4},        {"c10::half", 2},   {"half", 2},          {"c10::bfloat16", 2}, {"bfloat16", 2},
      {"double", 8},       {"int", 4},         {"unsigned int", 4},  {"long int", 8},      {"long", 8},
      {"int64_t", 8},      {"long long", 8},   {"short int", 2},     {"short", 2},         {"unsigned char", 1},
      {"signed char", 1},  {"char", 1},        {"byte", 1},          {"bool", 1},          {"c10::float8_e4m3fn", 1},
      {"float8_e4m3fn", 1}, {"c10::float8_e5m2", 1}, {"float8_e5m2", 1}, {"c10::complex<float>", 8},
  };
  const auto it = kBytes.find(t);
  return it == kBytes.end() ? 0 : it->second;
}

}  // namespace

int trace_dtype_bytes(std::string_view type) { return dtype_bytes_impl(lower(type)); }

bool is_nccl_kernel_name(std::string_view name) {
  return starts_with(name, "ncclKernel_") || starts_with(name, "ncclDevKernel_") || starts_with(name, "ncclKernel(") ||
         starts_with(name, "void ncclKernel") || starts_with(name, "void ncclDevKernel");
}

std::optional<CollectiveKind> trace_collective_kind(std::string_view name) {
  std::string n = lower(name);
  if (starts_with(n, "void ")) n.erase(0, 5);
  std::string key;
  if (starts_with(n, "ncclkernel_") || starts_with(n, "nccldevkernel_")) {
    // Kernel names: the collective is the token after the prefix, up to '_' or '('.
    for (std::size_t i = n.find('_') + 1; i < n.size() && n[i] != '_' && n[i] != '('; ++i) key += n[i];
  } else {
    // Collective names: "all_reduce", "allreduce", "_allgather_base", "nccl:all_to_all", ...
    for (std::string_view prefix : {"nccl:", "c10d::"})
      if (starts_with(n, prefix)) n.erase(0, prefix.size());
    for (char ch : n)
      if (ch != '_') key += ch;
  }
  // Longer names first: "reducescatter" before "reduce".
  static const std::pair<std::string_view, CollectiveKind> kKinds[] = {
      {"allreduce", CollectiveKind::kAllReduce},
      {"allgather", CollectiveKind::kAllGather},
      {"reducescatter", CollectiveKind::kReduceScatter},
      {"alltoall", CollectiveKind::kAllToAll},
      // NCCL runs all-to-all as grouped send/recv; these traces show it as SendRecv.
      {"sendrecv", CollectiveKind::kAllToAll},
      {"send", CollectiveKind::kAllToAll},
      {"recv", CollectiveKind::kAllToAll},
      {"broadcast", CollectiveKind::kBroadcast},
      {"reduce", CollectiveKind::kReduce},
  };
  for (const auto& [prefix, kind] : kKinds)
    if (starts_with(key, prefix)) return kind;
  return std::nullopt;
}

std::string KinetoTrace::device_name() const {
  for (const auto& d : devices)
    if (d.id == device) return d.name;
  return "unknown GPU";
}

int KinetoTrace::step_at(Seconds t) const {
  const auto it = std::upper_bound(steps.begin(), steps.end(), t,
                                   [](Seconds x, const TraceStep& s) { return x < s.start; });
  if (it == steps.begin()) return -1;
  const int k = static_cast<int>(it - steps.begin()) - 1;
  if (k + 1 == static_cast<int>(steps.size()) && t > steps.back().end()) return -1;
  return k;
}

int KinetoTrace::step_of_activity(int activity) const {
  const GpuActivity& a = gpu[static_cast<std::size_t>(activity)];
  return step_at(a.launch >= 0 ? runtime[static_cast<std::size_t>(a.launch)].start : a.start);
}

Seconds KinetoTrace::step_wall(int k) const {
  const auto i = static_cast<std::size_t>(k);
  return step_wall_is_period(k) ? steps[i + 1].start - steps[i].start : steps[i].duration;
}

int KinetoTrace::top_level_cpu_op(int call) const {
  int top = -1;
  for (int o = call >= 0 ? runtime[static_cast<std::size_t>(call)].op : -1; o >= 0;
       o = ops[static_cast<std::size_t>(o)].parent) {
    if (!ops[static_cast<std::size_t>(o)].annotation) top = o;
  }
  return top;
}

int KinetoTrace::innermost_cpu_op(int call) const {
  for (int o = call >= 0 ? runtime[static_cast<std::size_t>(call)].op : -1; o >= 0;
       o = ops[static_cast<std::size_t>(o)].parent) {
    if (!ops[static_cast<std::size_t>(o)].annotation) return o;
  }
  return -1;
}

namespace {

/// The event array of a trace: the document itself (a bare array) or its "traceEvents".
const json& trace_events(const json& root, const std::string& name) {
  if (root.is_array()) return root;
  if (!root.is_object())
    throw ConfigError(name, "", "not a PyTorch profiler trace: expected an object with \"traceEvents\"");
  const auto it = root.find("traceEvents");
  if (it == root.end() || !it->is_array())
    throw ConfigError(name, "/traceEvents", "not a PyTorch profiler trace: expected an array \"traceEvents\"");
  return *it;
}

/// An optional integer member of a header object, in [lo, hi]; absent or not an
/// integer gives nullopt (as before: writers differ), out of range is an error.
std::optional<std::int64_t> header_int(const json& obj, const char* key, std::int64_t lo, std::int64_t hi,
                                       const std::string& file, const std::string& pointer) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  const auto v = trace_integer(*it);
  if (!v || *v < lo || *v > hi)
    throw ConfigError(file, pointer + "/" + key, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, it->dump()));
  return v;
}

/// "distributedInfo": rank, world size and backend, when the trace has them.
void read_distributed_info(const json& root, KinetoTrace& t) {
  const auto d = root.find("distributedInfo");
  if (d == root.end() || !d->is_object()) return;
  const std::string ptr = "/distributedInfo";
  if (const auto r = header_int(*d, "rank", -limits::kMaxRanks, limits::kMaxRanks, t.file, ptr)) t.rank = static_cast<int>(*r);
  if (const auto w = header_int(*d, "world_size", 0, limits::kMaxRanks, t.file, ptr)) t.world_size = static_cast<int>(*w);
  if (const auto b = d->find("backend"); b != d->end() && b->is_string()) t.backend = b->get<std::string>();
  if (t.rank && (*t.rank < 0 || (t.world_size && *t.rank >= *t.world_size)))
    throw ConfigError(t.file, "/distributedInfo/rank", fmt::format("rank {} outside the world size", *t.rank));
}

/// "deviceProperties": one entry per GPU; fields of the wrong type are an error.
void read_device_properties(const json& root, KinetoTrace& t) {
  const auto dp = root.find("deviceProperties");
  if (dp == root.end() || !dp->is_array()) return;
  for (std::size_t i = 0; i < dp->size(); ++i) {
    const json& d = (*dp)[i];
    if (!d.is_object()) continue;
    const std::string ptr = fmt::format("/deviceProperties/{}", i);
    auto integer = [&](const char* key) {
      const auto it = d.find(key);
      if (it != d.end() && !it->is_number_integer())
        throw ConfigError(t.file, ptr + "/" + key, fmt::format("expected an integer, got {}", it->type_name()));
      return static_cast<int>(header_int(d, key, 0, 1 << 20, t.file, ptr).value_or(0));
    };
    TraceDevice dev;
    dev.id = integer("id");
    if (const auto n = d.find("name"); n != d.end()) {
      if (!n->is_string()) throw ConfigError(t.file, ptr + "/name", fmt::format("expected a string, got {}", n->type_name()));
      dev.name = n->get<std::string>();
    }
    if (const auto m = d.find("totalGlobalMem"); m != d.end()) {
      if (!m->is_number() || !(m->get<double>() >= 0 && m->get<double>() <= limits::kMaxBytes))
        throw ConfigError(t.file, ptr + "/totalGlobalMem", fmt::format("expected a size in bytes in [0, {:g}]", limits::kMaxBytes));
      dev.memory = m->get<double>();
    }
    dev.sms = integer("numSms");
    dev.compute_major = integer("computeMajor");
    dev.compute_minor = integer("computeMinor");
    t.devices.push_back(dev);
  }
}

/// Each kept event's raw span (microseconds) and, for steps, the step number.
struct RawSpans {
  std::vector<RawSpan> op, call, gpu, step;
  std::vector<std::int64_t> step_numbers;
};

void read_cpu_event(const json& e, const EventReader& r, Category cat, const std::string& ev_name, RawSpan span,
                    KinetoTrace& t, RawSpans& raw) {
  if (const auto n = step_number(ev_name, r)) {
    raw.step_numbers.push_back(*n);
    raw.step.push_back(span);
  }
  CpuOp op;
  op.name = ev_name;
  op.annotation = cat == Category::kAnnotation;
  op.tid = r.tid();
  op.input_dims = read_dims(r);
  op.input_types = read_types(r.args());
  op.record_function_id = r.arg_int("Record function id", false).value_or(-1);
  if (t.pid < 0 && cat == Category::kCpuOp) {
    if (const auto pid = r.own_int("pid")) t.pid = *pid;
  }
  (void)e;
  t.ops.push_back(std::move(op));
  raw.op.push_back(span);
}

void read_gpu_event(const EventReader& r, Category cat, const std::string& ev_name, RawSpan span, KinetoTrace& t,
                    RawSpans& raw) {
  GpuActivity a;
  a.kind = cat == Category::kKernel ? GpuActivityKind::kKernel
           : cat == Category::kMemcpy ? GpuActivityKind::kMemcpy
                                      : GpuActivityKind::kMemset;
  a.name = ev_name;
  a.stream = *r.arg_int("stream", true);
  a.correlation = r.arg_int("correlation", false).value_or(-1);
  // Device ids are small; pid stands in for the device on GPU rows of older traces.
  constexpr std::int64_t kMaxDevice = 1 << 20;
  const auto pid = r.own_int("pid");
  const std::int64_t device = r.arg_int("device", false, -1, kMaxDevice).value_or(pid.value_or(0));
  if (device < -1 || device > kMaxDevice) r.fail("pid", fmt::format("expected a device number in [-1, {}], got {}", kMaxDevice, device));
  a.device = static_cast<int>(device);
  if (a.kind != GpuActivityKind::kKernel) a.bytes = r.arg_number("bytes", limits::kMaxBytes).value_or(a.bytes);
  if (a.kind == GpuActivityKind::kKernel && is_nccl_kernel_name(a.name)) {
    a.collective = collective_from_kernel_args(r);
    if (!a.collective) {
      a.collective = TraceCollective{};
      if (const auto k = trace_collective_kind(a.name)) a.collective->kind = *k;
    }
  }
  t.gpu.push_back(std::move(a));
  raw.gpu.push_back(span);
}

/// Reads the "X" (complete) events of the known categories; others are skipped.
RawSpans read_events(const json& events, KinetoTrace& t) {
  RawSpans raw;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object()) continue;
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string() || ph->get_ref<const std::string&>() != "X") continue;
    const auto cat_it = e.find("cat");
    const Category cat = cat_it != e.end() && cat_it->is_string() ? category_of(cat_it->get<std::string>()) : Category::kOther;
    if (cat == Category::kOther) continue;
    EventReader r(e, t.file, i);
    RawSpan span{r.number("ts", kMaxAbsTimestampUs), r.number("dur", kMaxDurationUs)};
    if (span.dur_us < 0) r.fail("dur", fmt::format("expected a duration >= 0, got {}", span.dur_us));
    const std::string ev_name = r.string("name");
    switch (cat) {
      case Category::kCpuOp:
      case Category::kAnnotation: read_cpu_event(e, r, cat, ev_name, span, t, raw); break;
      case Category::kRuntime: {
        RuntimeCall c;
        c.name = ev_name;
        c.tid = r.tid();
        c.correlation = r.arg_int("correlation", false).value_or(-1);
        t.runtime.push_back(std::move(c));
        raw.call.push_back(span);
        break;
      }
      case Category::kKernel:
      case Category::kMemcpy:
      case Category::kMemset: read_gpu_event(r, cat, ev_name, span, t, raw); break;
      case Category::kOther: break;
    }
  }
  if (t.ops.empty() && t.gpu.empty() && t.runtime.empty())
    throw ConfigError(t.file, "/traceEvents", "no CPU op, runtime call or GPU event: not a PyTorch profiler trace");
  return raw;
}

/// Times relative to the earliest event, in seconds; steps deduplicated by number and
/// sorted by start, or one synthesized step spanning the trace when there is none.
void set_relative_times_and_steps(const RawSpans& raw, KinetoTrace& t) {
  double origin = std::numeric_limits<double>::infinity();
  for (const auto* v : {&raw.op, &raw.call, &raw.gpu})
    for (const auto& s : *v) origin = std::min(origin, s.ts_us);
  t.origin_us = origin;
  auto rel = [&](const RawSpan& s, Seconds& start, Seconds& dur) {
    start = (s.ts_us - origin) * kUs;
    dur = s.dur_us * kUs;
  };
  for (std::size_t i = 0; i < t.ops.size(); ++i) rel(raw.op[i], t.ops[i].start, t.ops[i].duration);
  for (std::size_t i = 0; i < t.runtime.size(); ++i) rel(raw.call[i], t.runtime[i].start, t.runtime[i].duration);
  for (std::size_t i = 0; i < t.gpu.size(); ++i) rel(raw.gpu[i], t.gpu[i].start, t.gpu[i].duration);
  std::set<std::int64_t> seen;
  for (std::size_t i = 0; i < raw.step.size(); ++i) {
    TraceStep s;
    s.number = raw.step_numbers[i];
    rel(raw.step[i], s.start, s.duration);
    if (seen.insert(s.number).second) t.steps.push_back(s);
  }
  std::sort(t.steps.begin(), t.steps.end(), [](const TraceStep& a, const TraceStep& b) { return a.start < b.start; });
  if (t.steps.empty()) {
    TraceStep all;
    all.number = -1;
    Seconds end = 0;
    for (const auto& o : t.ops) end = std::max(end, o.end());
    for (const auto& c : t.runtime) end = std::max(end, c.end());
    for (const auto& a : t.gpu) end = std::max(end, a.end());
    all.duration = end;
    t.steps.push_back(all);
    t.steps_synthesized = true;
  }
}

/// The rank's GPU: the device with the most activities (others appear only in
/// multi-GPU-per-process traces, which one rank's replay does not cover). Activities of
/// other devices are dropped; activities and calls are ordered by start.
void keep_main_device(KinetoTrace& t) {
  std::map<int, std::size_t> per_device;
  for (const auto& a : t.gpu) per_device[a.device]++;
  if (!per_device.empty()) {
    t.device = std::max_element(per_device.begin(), per_device.end(), [](const auto& a, const auto& b) {
                 return a.second < b.second;
               })->first;
    std::erase_if(t.gpu, [&](const GpuActivity& a) { return a.device != t.device; });
  }
  std::stable_sort(t.gpu.begin(), t.gpu.end(), [](const GpuActivity& a, const GpuActivity& b) { return a.start < b.start; });
  std::stable_sort(t.runtime.begin(), t.runtime.end(),
                   [](const RuntimeCall& a, const RuntimeCall& b) { return a.start < b.start; });
}

/// Links each GPU activity to the runtime call with its correlation id, and fills NCCL
/// collectives from their enclosing annotation.
void link_launches(KinetoTrace& t) {
  std::unordered_map<std::int64_t, int> call_of;
  call_of.reserve(t.runtime.size());
  for (std::size_t i = 0; i < t.runtime.size(); ++i)
    if (t.runtime[i].correlation >= 0) call_of.emplace(t.runtime[i].correlation, static_cast<int>(i));
  for (std::size_t i = 0; i < t.gpu.size(); ++i) {
    GpuActivity& a = t.gpu[i];
    const auto it = call_of.find(a.correlation);
    if (it == call_of.end()) continue;
    a.launch = it->second;
    t.runtime[static_cast<std::size_t>(it->second)].activities.push_back(static_cast<int>(i));
    if (a.collective && !a.collective->from_kernel_args) collective_from_annotation(t, a.launch, *a.collective);
  }
}

}  // namespace

KinetoTrace parse_kineto_trace(const std::string& text, const std::string& name) {
  const json root = parse_json_text(text, name, "a PyTorch profiler trace");
  const json& events = trace_events(root, name);
  KinetoTrace t;
  t.file = name;
  if (root.is_object()) {
    read_distributed_info(root, t);
    read_device_properties(root, t);
  }
  const RawSpans raw = read_events(events, t);
  set_relative_times_and_steps(raw, t);
  keep_main_device(t);
  build_nesting(t);
  link_launches(t);
  return t;
}

std::vector<KinetoTrace> load_kineto_traces(const std::vector<std::string>& paths) {
  std::vector<KinetoTrace> out;
  for (auto& doc : read_trace_inputs(paths)) {
    out.push_back(parse_kineto_trace(doc.text, doc.name));
    doc.text.clear();
    doc.text.shrink_to_fit();
  }
  return out;
}

}  // namespace perfcast
