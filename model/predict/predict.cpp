#include "model/predict/predict.hpp"

#include <array>

#include <cmath>

#include <fmt/format.h>

#include "model/graph/dlrm_builder.hpp"
#include "model/predict/trace_predict.hpp"
#include "model/sharding/hugectr_planner.hpp"
#include "model/graph/transformer_builder.hpp"
#include "topology/collective_calibration.hpp"
#include "core/input_file.hpp"
#include "core/json_text.hpp"

namespace perfcast {

namespace {

/// "host.op_overhead" -> "op_overhead" for a host-cost path, else "".
std::string host_key(const std::string& rest) {
  const std::string prefix = "host.";
  return rest.compare(0, prefix.size(), prefix) == 0 ? rest.substr(prefix.size()) : "";
}

/// Records a host-cost override under `section`: "host" (the system's host values, used as
/// given) or "runtime_host" (the runtime profile's values, scaled to the system's CPU).
void set_host_value(JsonDocument& doc, const std::string& section, const std::string& key, const std::string& path,
                    const std::string& value) {
  if (key.empty() || key.find_first_of(".[/") != std::string::npos)
    throw ConfigError("--set", path, "expected host.KEY with KEY one of op_overhead, backward_op_overhead, launch_overhead, collective_launch_overhead, moe_layer_overhead, fp8_module_overhead");
  if (!doc.root.is_object()) doc.root = nlohmann::json::object();
  if (!doc.root.contains(section)) doc.root[section] = nlohmann::json::object();
  apply_override(doc, section + "." + key, value);
}

/// Appends "[--set KEY=VALUE]" to the system's name for overrides that change what the
/// name describes (its size or GPU).
void mark_resized_system(JsonDocument& system, const std::string& key, const std::string& value) {
  if (key != "nodes" && key != "gpus_per_node" && key != "gpu") return;
  if (!system.root.is_object() || !system.root.contains("name") || !system.root["name"].is_string()) return;
  system.root["name"] = system.root["name"].get<std::string>() + fmt::format(" [--set {}={}]", key, value);
}

}  // namespace

void apply_override_text(const std::string& text, JsonDocument& system, JsonDocument& workload, JsonDocument* plan,
                         JsonDocument* host) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set", text, "expected PATH=VALUE, e.g. workload.batch_size=4096");
  }
  const std::string path = text.substr(0, eq);
  const std::string value = text.substr(eq + 1);
  const auto dot = path.find_first_of(".[/");
  const std::string head = path.substr(0, dot);
  const std::string rest = dot == std::string::npos ? "" : path.substr(dot + (path[dot] == '.' ? 1 : 0));
  if (head == "runtime" && dot == std::string::npos) {  // --set runtime=NAME: the workload's runtime profile
    workload.root["runtime"] = value;
    return;
  }
  if (rest.empty()) throw ConfigError("--set", path, "expected a key after the file name, e.g. system.nodes");
  if (head == "runtime" || (head == "system" && (rest == "host" || !host_key(rest).empty()))) {
    if (head == "runtime" && host_key(rest).empty())
      throw ConfigError("--set", path, "a runtime profile holds host costs only: expected runtime.host.KEY, e.g. runtime.host.op_overhead=20us");
    if (!host) return set_host_value(system, "host", host_key(rest), path, value);
    return set_host_value(*host, head == "runtime" ? "runtime_host" : "host", host_key(rest), path, value);
  }
  if (head == "system") {
    apply_override(system, rest, value);
    return mark_resized_system(system, rest, value);
  }
  if (head == "workload") return apply_override(workload, rest, value);
  if (head == "plan") {
    if (!plan) throw ConfigError("--set", path, "no --plan was given");
    return apply_override(*plan, rest, value);
  }
  std::string msg = fmt::format("unknown file \"{}\"; a path starts with system., workload., runtime. or plan.", head);
  const std::string guess = closest_match(head, {"system", "workload", "plan", "runtime"});
  if (!guess.empty()) msg += fmt::format(" (did you mean \"{}\"?)", guess);
  throw ConfigError("--set", path, msg);
}

void apply_host_overrides(SystemSpec& system, const JsonDocument& host) {
  if (!host.root.is_object() || !host.root.contains("host")) return;
  const JsonObject root(host);
  system.host = parse_host_spec(root.object("host"), system.host);
}

void rethrow_blaming_overrides(const ConfigError& e, const std::vector<std::string>& overrides, const std::string& doc_prefix,
                               const std::string& doc_file) {
  if (e.file() != doc_file) throw e;
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || o.compare(0, doc_prefix.size() + 1, doc_prefix + ".") != 0) continue;
    const std::string ptr = to_json_pointer(o.substr(doc_prefix.size() + 1, eq - doc_prefix.size() - 1));
    const std::string& at = e.pointer();
    const bool related = at == ptr || at.compare(0, ptr.size() + 1, ptr + "/") == 0 || ptr.compare(0, at.size() + 1, at + "/") == 0;
    if (related) throw ConfigError("--set " + o, at, fmt::format("{} (in {} after the override)", e.message(), doc_file));
  }
  // Not the overridden value itself, but maybe a consequence of one (a GPU count that
  // no longer divides the batch): say which overrides were in force.
  if (!overrides.empty())
    throw ConfigError(e.file(), e.pointer(), fmt::format("{} (with --set {})", e.message(), fmt::join(overrides, ", --set ")));
  throw e;
}

namespace {
/// A precision the GPU has no units for: tf32 where it has no TF32 tensor cores (Volta and
/// older: PyTorch's allow_tf32 has no effect there, the GEMMs run in fp32) is predicted as
/// fp32 with a warning; bf16 where it has no bf16 rate is refused (cuBLAS has no bf16 tensor-
/// core GEMMs on Volta), naming the file and key. Returns the warning, or "".
std::string check_gpu_precision(DType& dtype, const GpuSpec& gpu, const std::string& file, const char* key) {
  if (dtype == DType::kTf32 && gpu.peak_tf32 <= 0) {
    dtype = DType::kFp32;
    return fmt::format("{} has no TF32 tensor cores: {} tf32 runs as fp32 there (PyTorch's allow_tf32 has no effect), "
                       "predicted as fp32", gpu.name, key);
  }
  if (dtype == DType::kBf16 && gpu.peak_bf16 <= 0)
    throw ConfigError(file, std::string("/") + key,
                      fmt::format("{} has no bf16 tensor cores (the system gives no bf16 peak): bf16 GEMMs are not run at "
                                  "tensor-core speed there; use fp16 or fp32", gpu.name));
  return "";
}

/// The last guard of the contract "no NaN, infinite or negative time": inputs within the
/// limits of core/limits.hpp cannot produce one, so reaching it means an input no check
/// caught; it is reported as bad input naming both files.
std::unique_ptr<Prediction> require_finite_time(std::unique_ptr<Prediction> p, const std::string& system_file,
                                                const std::string& workload_file) {
  const double t = p->timeline.iteration_time;
  if (!std::isfinite(t) || t < 0) {
    throw ConfigError(workload_file, "",
                      fmt::format("with system {} the predicted iteration time is {} (not a finite time >= 0); check "
                                  "the sizes, bandwidths and rates of both files", system_file, t));
  }
  return p;
}
}  // namespace

std::unique_ptr<Prediction> predict(const PredictRequest& req) {
  JsonDocument system_doc = load_json_file(req.system);
  JsonDocument workload_doc = load_json_file(req.workload);
  std::optional<JsonDocument> plan_doc;
  if (req.plan) plan_doc = load_json_file(*req.plan);
  return predict_documents(std::move(system_doc), std::move(workload_doc), std::move(plan_doc), req.overrides, req.iterations,
                           req.steady_state);
}

namespace {

/// predict_documents after the overrides are applied; ConfigErrors name the files.
std::unique_ptr<Prediction> predict_overridden_documents(JsonDocument& system_doc, JsonDocument& workload_doc,
                                                         std::optional<JsonDocument>& plan_doc, const JsonDocument& host_overrides,
                                                         std::vector<std::string> overrides, int iterations,
                                                         const SteadyStateOptions& steady) {
  const std::string system_file = system_doc.file, workload_file = workload_doc.file;
  SystemSpec system = parse_system(system_doc);
  const std::optional<std::string> named_runtime = take_runtime_name(workload_doc);
  Workload any = parse_any_workload(workload_doc);
  // The software stack's host costs (runtime_profile.hpp): named, or the default per kind;
  // host costs given with --set win over both files.
  const bool transformer = std::holds_alternative<TransformerSpec>(any);
  std::optional<RuntimeProfile> runtime =
      load_runtime_profile(named_runtime.value_or(default_runtime(transformer)), workload_file, named_runtime.has_value(), system_file);
  const bool runtime_overridden = host_overrides.root.contains("runtime_host");
  if (runtime_overridden) {
    const JsonObject values = JsonObject(host_overrides).object("runtime_host");
    if (runtime) override_runtime_host(*runtime, values);
    else system.host = parse_host_spec(values, system.host);  // no profile: the values are the system's
  }
  if (runtime) apply_runtime(system, *runtime);
  apply_host_overrides(system, host_overrides);
  std::vector<std::string> notes;  // warnings of this function, added to the prediction's
  auto finish = [&](std::unique_ptr<Prediction> p) {
    for (auto& n : notes) p->warnings.push_back(std::move(n));
    if (runtime) {
      // A fitted profile used outside what it was fitted on is an extrapolation, not its held-out error.
      const bool tf = std::holds_alternative<TransformerSpec>(p->workload);
      const std::int64_t batch = tf ? std::get<TransformerSpec>(p->workload).global_batch
                                    : std::holds_alternative<DlrmSpec>(p->workload) ? std::get<DlrmSpec>(p->workload).batch_size : 0;
      if (batch > 0)
        runtime->outside_fit = outside_fit_regime(*runtime, tf ? "transformer" : "dlrm", p->system.gpu.name, p->system.world_size(), batch);
      p->runtime = runtime;
      p->provenance = prediction_provenance(p->system, load_system_kernel_calibration(p->system), p->kernel_calibration, &*runtime);
    }
    if (host_overrides.root.contains("host")) mark_host_set_by_override(p->provenance, json_text(host_overrides.root.at("host")));
    if (runtime_overridden)
      mark_host_set_by_override(p->provenance, "runtime " + json_text(host_overrides.root.at("runtime_host")));
    return require_finite_time(std::move(p), system_file, workload_file);
  };
  if (auto* tf = std::get_if<TransformerSpec>(&any)) {
    if (plan_doc) throw ConfigError(plan_doc->file, "", "a sharding plan applies to DLRM workloads only");
    if (runtime && runtime->pipeline_host_blocking) tf->pipeline_host_blocking = *runtime->pipeline_host_blocking;
    if (runtime) (void)apply_runtime_transformer(*tf, *runtime, system.gpu);
    if (std::string w = check_gpu_precision(tf->precision, system.gpu, workload_file, "precision"); !w.empty()) notes.push_back(w);
    return finish(predict_transformer(std::move(system), std::move(*tf), std::move(overrides), iterations, steady));
  }
  if (auto* tw = std::get_if<TraceWorkload>(&any)) {
    if (plan_doc) throw ConfigError(plan_doc->file, "", "a sharding plan applies to DLRM workloads only");
    return finish(predict_trace(std::move(system), std::move(*tw), std::move(overrides), iterations));
  }
  DlrmSpec workload = std::get<DlrmSpec>(std::move(any));
  if (runtime)
    for (const auto& n : apply_runtime_stack(workload, *runtime)) notes.push_back(fmt::format("runtime {} sets {}", runtime->name, n));
  if (std::string w = check_gpu_precision(workload.mlp_dtype, system.gpu, workload_file, "mlp_dtype"); !w.empty()) notes.push_back(w);
  const int world = system.world_size();
  ShardingPlan plan = plan_doc ? parse_plan(*plan_doc, workload, world, system.gpus_per_node) : default_plan(workload, world);
  if (!plan_doc && workload.stack.hugectr_planner && world > 1) {
    if (auto h = hugectr_auto_plan(workload, system, hugectr_dgx_h100_options(system.nodes))) {
      h->source += " (the runtime's planner: HugeCTR's samples/dlrm/sharding with its DGX H100 settings)";
      plan = std::move(*h);
    } else {
      notes.push_back("HugeCTR's planner finds no plan within its 60 GB a GPU: the default table-wise round robin instead");
    }
  }
  return finish(predict_parsed(std::move(system), std::move(workload), std::move(plan), std::move(overrides), iterations));
}

}  // namespace

std::unique_ptr<Prediction> predict_documents(JsonDocument system_doc, JsonDocument workload_doc,
                                              std::optional<JsonDocument> plan_doc, std::vector<std::string> overrides,
                                              int iterations, SteadyStateOptions steady) {
  JsonDocument host_overrides{nlohmann::json::object(), "--set"};
  for (const auto& o : overrides)
    apply_override_text(o, system_doc, workload_doc, plan_doc ? &*plan_doc : nullptr, &host_overrides);
  const std::string system_file = system_doc.file, workload_file = workload_doc.file;
  try {
    return predict_overridden_documents(system_doc, workload_doc, plan_doc, host_overrides, overrides, iterations, steady);
  } catch (const ConfigError& e) {
    if (e.file() == system_file) rethrow_blaming_overrides(e, overrides, "system", system_file);
    if (e.file() == workload_file) rethrow_blaming_overrides(e, overrides, "workload", workload_file);
    throw;
  }
}

PredictionModels load_prediction_models(Prediction& p) {
  PredictionModels m;
  m.comm = make_collective_model(p.system);
  p.collective_model = std::string(m.comm->name());
  if (!p.system.comms_calibration.empty()) p.collective_model += " (" + p.system.comms_calibration.string() + ")";
  m.calibration = load_system_kernel_calibration(p.system, &p.kernel_calibration);
  p.provenance = prediction_provenance(p.system, m.calibration, p.kernel_calibration);
  return m;
}

std::string missing_calibration_warning(const SystemSpec& system) {
  if (!system.kernel_calibration.empty()) return "";  // named, hence found (parse_system checks)
  return fmt::format("spec-derived predictors: no kernel calibration for {} (looked for ../calibration/{} from the system file's "
                     "folder; predict --calibration FILE names one)",
                     system.gpu.name, calibration_file_name(system.gpu.name));
}

std::optional<KernelCalibration> load_system_kernel_calibration(const SystemSpec& system, std::string* path_out) {
  const auto path = !system.kernel_calibration.empty()
                        ? system.kernel_calibration
                        : std::filesystem::path(system.file).parent_path() / ".." / "calibration" / calibration_file_name(system.gpu.name);
  if (const InputPathStatus st = input_path_status(path); !st.exists()) {
    if (!st.error.empty()) throw ConfigError(path.string(), "", fmt::format("cannot look up the kernel calibration: {}", st.error));
    return std::nullopt;
  }
  if (path_out) *path_out = path.lexically_normal().string();
  return parse_kernel_calibration(load_json_file(path));
}

namespace {
/// The pipeline after the graph is built: the system's collective model and kernel
/// calibration, annotation, `opts.iterations` simulated iterations, the timeline analysis.
void annotate_and_simulate(Prediction& p, const SimulationOptions& opts) {
  const PredictionModels models = load_prediction_models(p);
  Annotator annotator(p.system, *models.comm);
  if (models.calibration) annotator.set_calibration(&*models.calibration);
  p.timed = annotator.annotate(p.graph);
  p.timeline = simulate(p.timed, p.system.host, opts);
  p.analysis = analyze_timeline(p.timeline, p.graph);
}

/// Simulates `plan.simulated` micro-batch counts of `w` and extrapolates the steady state
/// to w's count (steady_state.hpp). `p` keeps the graph and timeline of the first count,
/// with the extrapolated iteration time and analysis. False, leaving `p` without a
/// simulation, when the increments disagree (the schedule has not settled). The first (longest)
/// simulation decides how many contention passes run; the other two run exactly as many, so
/// that the three differ only in their micro-batches.
bool simulate_steady_state(Prediction& p, const TransformerSpec& w, const SteadyStatePlan& plan, int iterations,
                           double agreement) {
  std::array<TimelineAnalysis, 3> analyses;
  std::array<Seconds, 3> times{};
  SimulationOptions opts;
  opts.iterations = iterations;
  // The longer two first, each freed before the next; the shortest stays in `p`.
  for (std::size_t k = plan.simulated.size(); k-- > 0;) {
    Prediction scratch;
    Prediction& target = k == 0 ? p : scratch;
    if (k > 0) target.system = p.system;
    target.graph = build_transformer_graph(with_micro_batches(w, plan.simulated[k]), p.system.world_size());
    annotate_and_simulate(target, opts);
    if (k + 1 == plan.simulated.size() && target.timeline.contention_passes > 0) {
      opts.contention_passes = target.timeline.contention_passes;
      opts.contention_tolerance = 0;
    }
    times[k] = target.timeline.iteration_time;
    analyses[k] = k == 0 ? target.analysis : std::move(target.analysis);
  }
  // The iteration time is a maximum over ranks' window ends: its own increments must agree
  // as well as every rank's figures.
  const bool times_agree = agreement >= 0 && std::abs((times[2] - times[1]) - (times[1] - times[0])) <= agreement * times[2];
  if (!times_agree || !increments_agree(analyses[0], analyses[1], analyses[2], times[2], agreement)) {
    p.graph = {};
    p.timed = {};
    p.timeline = {};
    p.analysis = {};
    return false;
  }
  const double steps = double(plan.micro_batches - plan.simulated[2]) / double(plan.step);
  const Seconds per_step = times[2] - times[1];
  std::vector<int> kept_events = std::move(p.analysis.critical_events);
  p.analysis = extrapolate_analysis(analyses[1], analyses[2], steps);
  p.analysis.critical_events = std::move(kept_events);
  p.timeline.iteration_time = times[2] + steps * per_step;
  p.steady_state = SteadyStateExtrapolation{plan.micro_batches, plan.simulated, plan.step, per_step};
  return true;
}

}  // namespace

std::unique_ptr<Prediction> predict_parsed(SystemSpec system, DlrmSpec workload, ShardingPlan plan,
                                           std::vector<std::string> overrides, int iterations) {
  auto p = std::make_unique<Prediction>();
  p->overrides = std::move(overrides);
  p->system = std::move(system);
  p->workload = std::move(workload);
  p->plan = std::move(plan);
  const DlrmSpec& w = std::get<DlrmSpec>(p->workload);
  p->graph = build_dlrm_graph(w, p->plan, p->system.world_size(), p->system.gpus_per_node, host_link_of(p->system));
  annotate_and_simulate(*p, SimulationOptions{.iterations = iterations});
  p->memory = estimate_memory(w, p->plan, p->system);
  if (const std::string verdict = memory_verdict(p->memory); !verdict.empty()) {
    p->warnings.push_back("the plan does not fit in memory: " + verdict);
  }
  if (p->kernel_calibration.empty()) p->warnings.push_back(missing_calibration_warning(p->system));
  return p;
}

std::unique_ptr<Prediction> predict_transformer(SystemSpec system, TransformerSpec workload, std::vector<std::string> overrides,
                                                int iterations, SteadyStateOptions steady) {
  resolve_parallelism(workload, system.world_size());
  auto p = std::make_unique<Prediction>();
  p->overrides = std::move(overrides);
  p->system = std::move(system);
  p->plan.source = "none (transformer)";
  p->memory = estimate_transformer_memory(workload, p->system);
  // A schedule that has not settled within the first base may within a larger one (a long
  // warmup of overlapped reductions); then every micro-batch is simulated.
  bool extrapolated = false;
  for (const std::int64_t scale : {std::int64_t{1}, std::int64_t{4}}) {
    SteadyStateOptions o = steady;
    o.base_scale = scale;
    const std::optional<SteadyStatePlan> plan = steady_state_plan(workload, o);
    if (!plan) break;
    if ((extrapolated = simulate_steady_state(*p, workload, *plan, iterations, steady.agreement))) break;
  }
  if (!extrapolated) {
    p->graph = build_transformer_graph(workload, p->system.world_size());
    annotate_and_simulate(*p, SimulationOptions{.iterations = iterations});
  }
  p->workload = std::move(workload);
  if (const std::string verdict = memory_verdict(p->memory); !verdict.empty()) {
    p->warnings.push_back("the model does not fit in device memory: " + verdict);
  }
  if (p->kernel_calibration.empty()) p->warnings.push_back(missing_calibration_warning(p->system));
  return p;
}

}  // namespace perfcast
