#include "model/traces/kineto_trace.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/traces/trace_input.hpp"
#include "core/json_reader.hpp"

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

/// Reads fields of one event and names the event's JSON pointer in errors.
class EventReader {
 public:
  EventReader(const json& e, const std::string& file, std::size_t index)
      : e_(e), file_(file), pointer_(fmt::format("/traceEvents/{}", index)) {}

  [[noreturn]] void fail(std::string_view key, const std::string& message) const {
    throw ConfigError(file_, key.empty() ? pointer_ : pointer_ + "/" + std::string(key), message);
  }
  [[nodiscard]] double number(const char* key) const {
    const auto it = e_.find(key);
    if (it == e_.end()) fail(key, "missing required key");
    if (!it->is_number()) fail(key, fmt::format("expected a number, got {}", it->type_name()));
    return it->get<double>();
  }
  [[nodiscard]] std::string string(const char* key) const {
    const auto it = e_.find(key);
    if (it == e_.end() || !it->is_string()) fail(key, "expected a string");
    return it->get<std::string>();
  }
  /// Thread ids are numbers, but some writers use strings; strings are hashed.
  [[nodiscard]] std::int64_t tid() const {
    const auto it = e_.find("tid");
    if (it == e_.end()) return 0;
    if (it->is_number()) return it->get<std::int64_t>();
    if (it->is_string()) return static_cast<std::int64_t>(std::hash<std::string>{}(it->get<std::string>()) >> 1);
    fail("tid", "expected a number or a string");
  }
  [[nodiscard]] const json* args() const {
    const auto it = e_.find("args");
    return it != e_.end() && it->is_object() ? &*it : nullptr;
  }
  /// An integer argument; `required` makes a missing one an error.
  [[nodiscard]] std::optional<std::int64_t> arg_int(const char* key, bool required) const {
    const json* a = args();
    const auto it = a ? a->find(key) : json::const_iterator{};
    if (!a || it == a->end()) {
      if (required) fail(std::string("args/") + key, "missing required key");
      return std::nullopt;
    }
    if (!it->is_number()) fail(std::string("args/") + key, fmt::format("expected a number, got {}", it->type_name()));
    return it->get<std::int64_t>();
  }
  [[nodiscard]] const std::string& pointer() const { return pointer_; }

 private:
  const json& e_;
  const std::string& file_;
  std::string pointer_;
};

/// Kineto "Input Dims": a list per input, each a list of sizes (empty for scalars).
std::vector<std::vector<std::int64_t>> read_dims(const json* args) {
  std::vector<std::vector<std::int64_t>> out;
  if (!args) return out;
  const auto it = args->find("Input Dims");
  if (it == args->end() || !it->is_array()) return out;
  for (const auto& input : *it) {
    std::vector<std::int64_t> dims;
    if (input.is_array()) {
      for (const auto& d : input)
        if (d.is_number_integer()) dims.push_back(d.get<std::int64_t>());
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

std::optional<std::int64_t> step_number(const std::string& name) {
  static constexpr std::string_view kPrefix = "ProfilerStep#";
  if (!starts_with(name, kPrefix) || name.size() == kPrefix.size()) return std::nullopt;
  std::int64_t n = 0;
  for (std::size_t i = kPrefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
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
std::optional<TraceCollective> collective_from_kernel_args(const json* args) {
  if (!args) return std::nullopt;
  const auto name = args->find("Collective name");
  if (name == args->end() || !name->is_string()) return std::nullopt;
  TraceCollective c;
  c.name = name->get<std::string>();
  c.from_kernel_args = true;
  if (const auto k = trace_collective_kind(c.name)) c.kind = *k;
  if (const auto t = args->find("dtype"); t != args->end() && t->is_string()) c.dtype = t->get<std::string>();
  if (const auto n = args->find("In msg nelems"); n != args->end() && n->is_number())
    c.bytes = n->get<double>() * trace_dtype_bytes(c.dtype);
  if (const auto g = args->find("Group size"); g != args->end() && g->is_number_integer()) c.group_size = g->get<int>();
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
      for (auto d : op.input_dims[0]) elements *= static_cast<double>(d);
      c.bytes = elements * trace_dtype_bytes(c.dtype);
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

KinetoTrace parse_kineto_trace(const std::string& text, const std::string& name) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ConfigError(name, "", fmt::format("invalid JSON at byte {}", e.byte));
  }
  const json* events = nullptr;
  if (root.is_array()) {
    events = &root;
  } else if (root.is_object()) {
    const auto it = root.find("traceEvents");
    if (it == root.end() || !it->is_array())
      throw ConfigError(name, "/traceEvents", "not a PyTorch profiler trace: expected an array \"traceEvents\"");
    events = &*it;
  } else {
    throw ConfigError(name, "", "not a PyTorch profiler trace: expected an object with \"traceEvents\"");
  }

  KinetoTrace t;
  t.file = name;
  if (root.is_object()) {
    if (const auto d = root.find("distributedInfo"); d != root.end() && d->is_object()) {
      if (const auto r = d->find("rank"); r != d->end() && r->is_number_integer()) t.rank = r->get<int>();
      if (const auto w = d->find("world_size"); w != d->end() && w->is_number_integer()) t.world_size = w->get<int>();
      if (const auto b = d->find("backend"); b != d->end() && b->is_string()) t.backend = b->get<std::string>();
      if (t.rank && (*t.rank < 0 || (t.world_size && *t.rank >= *t.world_size)))
        throw ConfigError(name, "/distributedInfo/rank", fmt::format("rank {} outside the world size", *t.rank));
    }
    if (const auto dp = root.find("deviceProperties"); dp != root.end() && dp->is_array()) {
      for (const auto& d : *dp) {
        if (!d.is_object()) continue;
        TraceDevice dev;
        dev.id = d.value("id", 0);
        dev.name = d.value("name", std::string());
        dev.memory = d.value("totalGlobalMem", 0.0);
        dev.sms = d.value("numSms", 0);
        dev.compute_major = d.value("computeMajor", 0);
        dev.compute_minor = d.value("computeMinor", 0);
        t.devices.push_back(dev);
      }
    }
  }

  std::vector<RawSpan> op_raw, call_raw, gpu_raw, step_raw;
  std::vector<std::int64_t> step_numbers;
  for (std::size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    if (!e.is_object()) continue;
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string() || ph->get_ref<const std::string&>() != "X") continue;
    const auto cat_it = e.find("cat");
    const Category cat = cat_it != e.end() && cat_it->is_string() ? category_of(cat_it->get<std::string>()) : Category::kOther;
    if (cat == Category::kOther) continue;
    EventReader r(e, name, i);
    RawSpan span{r.number("ts"), r.number("dur")};
    if (span.dur_us < 0) r.fail("dur", fmt::format("expected a duration >= 0, got {}", span.dur_us));
    const std::string ev_name = r.string("name");
    switch (cat) {
      case Category::kCpuOp:
      case Category::kAnnotation: {
        if (const auto n = step_number(ev_name)) {
          step_numbers.push_back(*n);
          step_raw.push_back(span);
        }
        CpuOp op;
        op.name = ev_name;
        op.annotation = cat == Category::kAnnotation;
        op.tid = r.tid();
        op.input_dims = read_dims(r.args());
        op.input_types = read_types(r.args());
        op.record_function_id = r.arg_int("Record function id", false).value_or(-1);
        if (t.pid < 0 && cat == Category::kCpuOp) {
          if (const auto pid = e.find("pid"); pid != e.end() && pid->is_number_integer()) t.pid = pid->get<std::int64_t>();
        }
        t.ops.push_back(std::move(op));
        op_raw.push_back(span);
        break;
      }
      case Category::kRuntime: {
        RuntimeCall c;
        c.name = ev_name;
        c.tid = r.tid();
        c.correlation = r.arg_int("correlation", false).value_or(-1);
        t.runtime.push_back(std::move(c));
        call_raw.push_back(span);
        break;
      }
      case Category::kKernel:
      case Category::kMemcpy:
      case Category::kMemset: {
        GpuActivity a;
        a.kind = cat == Category::kKernel ? GpuActivityKind::kKernel
                 : cat == Category::kMemcpy ? GpuActivityKind::kMemcpy
                                            : GpuActivityKind::kMemset;
        a.name = ev_name;
        a.stream = *r.arg_int("stream", true);
        a.correlation = r.arg_int("correlation", false).value_or(-1);
        const auto pid = e.find("pid");
        a.device = static_cast<int>(
            r.arg_int("device", false).value_or(pid != e.end() && pid->is_number_integer() ? pid->get<std::int64_t>() : 0));
        if (a.kind != GpuActivityKind::kKernel) {
          if (const json* args = r.args(); args) {
            if (const auto b = args->find("bytes"); b != args->end() && b->is_number()) a.bytes = b->get<double>();
          }
        }
        if (a.kind == GpuActivityKind::kKernel && is_nccl_kernel_name(a.name)) {
          a.collective = collective_from_kernel_args(r.args());
          if (!a.collective) {
            a.collective = TraceCollective{};
            if (const auto k = trace_collective_kind(a.name)) a.collective->kind = *k;
          }
        }
        t.gpu.push_back(std::move(a));
        gpu_raw.push_back(span);
        break;
      }
      case Category::kOther: break;
    }
  }
  if (t.ops.empty() && t.gpu.empty() && t.runtime.empty())
    throw ConfigError(name, "/traceEvents", "no CPU op, runtime call or GPU event: not a PyTorch profiler trace");

  // Times relative to the earliest event, in seconds.
  double origin = std::numeric_limits<double>::infinity();
  for (const auto* v : {&op_raw, &call_raw, &gpu_raw})
    for (const auto& s : *v) origin = std::min(origin, s.ts_us);
  t.origin_us = origin;
  auto rel = [&](const RawSpan& s, Seconds& start, Seconds& dur) {
    start = (s.ts_us - origin) * kUs;
    dur = s.dur_us * kUs;
  };
  for (std::size_t i = 0; i < t.ops.size(); ++i) rel(op_raw[i], t.ops[i].start, t.ops[i].duration);
  for (std::size_t i = 0; i < t.runtime.size(); ++i) rel(call_raw[i], t.runtime[i].start, t.runtime[i].duration);
  for (std::size_t i = 0; i < t.gpu.size(); ++i) rel(gpu_raw[i], t.gpu[i].start, t.gpu[i].duration);
  for (std::size_t i = 0; i < step_raw.size(); ++i) {
    TraceStep s;
    s.number = step_numbers[i];
    rel(step_raw[i], s.start, s.duration);
    if (std::none_of(t.steps.begin(), t.steps.end(), [&](const TraceStep& x) { return x.number == s.number; }))
      t.steps.push_back(s);
  }
  std::sort(t.steps.begin(), t.steps.end(), [](const TraceStep& a, const TraceStep& b) { return a.start < b.start; });
  if (t.steps.empty()) {
    // No ProfilerStep#N: one step spanning the whole trace.
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

  // The rank's GPU: the device with the most activities (others appear only in
  // multi-GPU-per-process traces, which one rank's replay does not cover).
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

  build_nesting(t);

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
