#include "model/predict/runtime_profile.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/input_file.hpp"

namespace perfcast {

std::optional<std::string> take_runtime_name(JsonDocument& doc) {
  if (!doc.root.is_object() || !doc.root.contains("runtime")) return std::nullopt;
  const auto& v = doc.root["runtime"];
  if (!v.is_string() || v.get<std::string>().empty())
    throw ConfigError(doc.file, "/runtime", "expected the name of a runtime profile (configs/runtimes/NAME.json)");
  std::string name = v.get<std::string>();
  doc.root.erase("runtime");
  return name;
}

std::string default_runtime(bool transformer) { return transformer ? "megatron_deepspeed" : "pytorch_eager"; }

bool is_runtime_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-')) return false;
  return true;
}

namespace {

Fusion parse_fusion(const JsonObject& o, const char* key) {
  const std::string v = o.at(key).as_enum({"none", "pointwise", "gemm_epilogue"});
  return v == "none" ? Fusion::kNone : v == "pointwise" ? Fusion::kPointwise : Fusion::kEpilogue;
}

RuntimeDlrmStack parse_dlrm_stack(const JsonObject& o, std::vector<std::string>& settings) {
  RuntimeDlrmStack st;
  auto given = [&](const char* key) {
    if (!o.find(key)) return false;
    settings.push_back(std::string("dlrm.") + key);
    return true;
  };
  if (auto f = o.find("fusion")) {
    const JsonObject fusion = f->as_object();
    auto fgiven = [&](const char* key) {
      if (!fusion.find(key)) return false;
      settings.push_back(std::string("dlrm.fusion.") + key);
      return true;
    };
    if (fgiven("dcn_cross")) st.dcn_cross = parse_fusion(fusion, "dcn_cross");
    if (fgiven("mlp_backward")) st.mlp_backward = parse_fusion(fusion, "mlp_backward");
    if (fgiven("interaction")) st.fused_interaction = fusion.at("interaction").as_enum({"none", "fused"}) == "fused";
    fusion.finish();
  }
  if (given("embedding_optimizer")) st.fused_embedding_optimizer = o.at("embedding_optimizer").as_enum({"fused", "separate"}) == "fused";
  if (given("pipeline")) {
    const std::string p = o.at("pipeline").as_enum({"none", "sparse_dist", "semi_sync"});
    st.pipeline = p == "none" ? TrainPipeline::kNone : p == "sparse_dist" ? TrainPipeline::kSparseDist : TrainPipeline::kSemiSync;
  }
  if (given("reader")) st.overlapped_reader = o.at("reader").as_enum({"blocking", "overlapped"}) == "overlapped";
  if (given("launch")) st.cuda_graphs = o.at("launch").as_enum({"eager", "cuda_graphs"}) == "cuda_graphs";
  if (given("weight_gradients")) st.async_weight_gradients = o.at("weight_gradients").as_enum({"in_layer", "async"}) == "async";
  if (given("planner")) st.hugectr_planner = o.at("planner").as_enum({"round_robin", "hugectr_auto"}) == "hugectr_auto";
  if (given("gradient_allreduce")) st.grouped_allreduce = o.at("gradient_allreduce").as_enum({"buckets", "grouped"}) == "grouped";
  if (given("gradient_dtype")) st.gradient_dtype = *dtype_from_name(o.at("gradient_dtype").as_enum({"fp32", "fp16", "bf16"}));
  if (given("dense")) st.compiled_dense = o.at("dense").as_enum({"eager", "compiled"}) == "compiled";
  if (given("mlp_dtype")) st.mlp_dtype = *dtype_from_name(o.at("mlp_dtype").as_enum({"fp32", "tf32", "bf16", "fp16"}));
  if (given("embedding_dtype")) st.embedding_dtype = *dtype_from_name(o.at("embedding_dtype").as_enum({"fp32", "fp16", "bf16"}));
  if (given("embedding_output")) st.embedding_output = *dtype_from_name(o.at("embedding_output").as_enum({"fp32", "fp16", "bf16"}));
  if (given("embedding_update"))
    st.embedding_update = embedding_optimizer_from_name(o.at("embedding_update").as_enum({"sgd", "rowwise_adagrad", "adagrad", "adam"}));
  o.finish();
  return st;
}

FitRegime parse_regime(const JsonObject& o) {
  FitRegime g;
  const JsonArray gpus = o.array("gpus");
  gpus.require_size(1, 64);
  for (std::size_t i = 0; i < gpus.size(); ++i) g.gpus.push_back(gpus[i].as_string());
  const JsonArray count = o.array("gpu_count");
  count.require_size(2, 2);
  g.min_gpus = static_cast<int>(count[0].as_integer(1, 1 << 20));
  g.max_gpus = static_cast<int>(count[1].as_integer(g.min_gpus, 1 << 20));
  const JsonArray batch = o.array("batch");
  batch.require_size(2, 2);
  g.min_batch = batch[0].as_integer(1, 1LL << 40);
  g.max_batch = batch[1].as_integer(g.min_batch, 1LL << 40);
  g.workload = o.at("workload").as_enum({"dlrm", "transformer"});
  o.finish();
  return g;
}

}  // namespace

bool is_runtime_path(const std::string& name) {
  return name.find('/') != std::string::npos || std::filesystem::path(name).extension() == ".json";
}

std::vector<std::filesystem::path> runtime_search_dirs(const std::string& workload_file, const std::string& system_file) {
  std::vector<std::filesystem::path> dirs;
  auto add = [&](const std::filesystem::path& d) {
    const auto n = d.lexically_normal();
    if (std::find(dirs.begin(), dirs.end(), n) == dirs.end()) dirs.push_back(n);
  };
  add(std::filesystem::path(workload_file).parent_path() / ".." / "runtimes");
  if (!system_file.empty()) add(std::filesystem::path(system_file).parent_path() / ".." / "runtimes");
#ifdef PERFCAST_CONFIGS_DIR
  add(std::filesystem::path(PERFCAST_CONFIGS_DIR) / "runtimes");
#endif
  return dirs;
}

std::optional<RuntimeProfile> load_runtime_profile(const std::string& name, const std::string& workload_file, bool required,
                                                   const std::string& system_file) {
  std::filesystem::path path;
  if (is_runtime_path(name)) {
    path = name;
    if (const InputPathStatus st = input_path_status(path); !st.exists())
      throw ConfigError(name, "", st.error.empty() ? std::string("no such runtime profile file") : "cannot look up the file: " + st.error);
  } else {
    if (!is_runtime_name(name))
      throw ConfigError("runtime", "", fmt::format("\"{}\": a runtime name is letters, digits, _ and - (or a path to a .json file)", name));
    const auto dirs = runtime_search_dirs(workload_file, system_file);
    for (const auto& d : dirs) {
      if (input_path_status(d / (name + ".json")).exists()) {
        path = d / (name + ".json");
        break;
      }
    }
    if (path.empty()) {
      if (!required) return std::nullopt;
      std::vector<std::string> looked;
      for (const auto& d : dirs) looked.push_back(d.string());
      throw ConfigError((dirs.front() / (name + ".json")).string(), "",
                        fmt::format("no runtime profile \"{}\" (looked in {}; or name a file: --set runtime=PATH.json)", name,
                                    fmt::join(looked, ", ")));
    }
  }
  const JsonDocument doc = load_json_file(path);
  const JsonObject root(doc);
  root.require_schema("perfcast.runtime", 1);
  RuntimeProfile r;
  r.name = is_runtime_path(name) ? path.stem().string() : name;
  r.file = path.string();
  (void)root.string("name");
  const JsonObject host = root.object("host");
  auto opt = [&](const char* key) -> std::optional<Seconds> {
    if (!host.find(key)) return std::nullopt;
    return host.quantity(key, Dimension::kTime);
  };
  r.op_overhead = opt("op_overhead");
  r.backward_op_overhead = opt("backward_op_overhead");
  r.launch_overhead = opt("launch_overhead");
  r.collective_launch_overhead = opt("collective_launch_overhead");
  r.moe_layer_overhead = opt("moe_layer_overhead");
  r.fp8_module_overhead = opt("fp8_module_overhead");
  r.table_overhead = opt("table_overhead");
  r.sample_overhead = opt("sample_overhead");
  r.graph_launch_overhead = opt("graph_launch_overhead");
  host.finish();
  std::vector<std::string> settings;  // "dlrm.KEY" of every DLRM setting given, to be sourced
  if (auto dlrm = root.find("dlrm")) r.dlrm = parse_dlrm_stack(dlrm->as_object(), settings);
  if (const auto rules = root.find("attention_kernel")) {
    const JsonArray a = rules->as_array();
    a.require_size(1, 16);
    for (std::size_t i = 0; i < a.size(); ++i) {
      const JsonObject o = a[i].as_object();
      AttentionKernelRule rule;
      rule.min_compute_capability = o.number_or("min_compute_capability", 1.0, 20.0, 0.0);
      if (!o.find("kernel")) o.fail("kernel", "each rule names its kernel: flash2, flash3 or cudnn");
      rule.kernel = *attention_kernel_from_name(o.enum_or("kernel", {"flash2", "flash3", "cudnn"}, "flash2"));
      o.finish();
      r.attention_kernels.push_back(rule);
    }
    settings.push_back("attention_kernel");
  }
  if (root.find("pipeline_transfers"))
    r.pipeline_host_blocking = root.enum_or("pipeline_transfers", {"host_blocking", "stream_ordered"}, "host_blocking") == "host_blocking";
  if (auto fit = root.find("fit")) {
    const JsonObject f = fit->as_object();
    r.measured_on = f.string("measured_on");
    (void)f.string("method");
    (void)f.string("heldout");
    const JsonValue e = f.at("heldout_geomean_abs_error");
    r.heldout_error = e.as_number();
    if (r.heldout_error < 0 || r.heldout_error > 10) e.fail("expected a geomean |error| between 0 and 10");
    if (f.find("cpu")) {
      r.fit_cpu = f.string("cpu");
      r.fit_host_speed = f.at("host_speed").as_number_in(0.01, 100.0);
    }
    if (auto regime = f.find("regime")) r.regime = parse_regime(regime->as_object());
    f.finish();
  }
  const auto sources = root.find("sources");
  for (const auto& key : settings) {
    bool sourced = false;
    for (std::string k = key; sources && sources->is_object();) {  // the key, or a section above it
      if (sources->raw().contains(k)) {
        sourced = true;
        break;
      }
      const auto dot = k.rfind('.');
      if (dot == std::string::npos) break;
      k.resize(dot);
    }
    if (!sourced)
      root.fail("sources", fmt::format("the setting {} needs a source: an entry \"{}\" (or one for its section) in \"sources\"", key, key));
  }
  root.finish();
  return r;
}

std::optional<AttentionKernel> RuntimeProfile::attention_kernel_for(double cc) const {
  for (const AttentionKernelRule& rule : attention_kernels)
    if (rule.min_compute_capability <= 0 || (cc > 0 && cc >= rule.min_compute_capability)) return rule.kernel;
  return std::nullopt;
}

std::string apply_runtime_transformer(TransformerSpec& w, const RuntimeProfile& runtime, const GpuSpec& gpu) {
  if (w.attention != AttentionImpl::kFlash || w.attention_kernel_stated) return "";
  const auto kernel = runtime.attention_kernel_for(gpu.compute_capability);
  if (!kernel) return "";
  w.attention_kernel = *kernel;
  const std::string cc = gpu.compute_capability > 0 ? fmt::format("{:.1f}", gpu.compute_capability) : "not stated";
  w.attention_kernel_basis = fmt::format("runtime {} on compute capability {}", runtime.name, cc);
  return fmt::format("attention_kernel {} (compute capability {})", attention_kernel_name(*kernel), cc);
}

void override_runtime_host(RuntimeProfile& r, const JsonObject& o) {
  auto opt = [&](const char* key, std::optional<Seconds>& into) {
    if (o.find(key)) into = o.quantity(key, Dimension::kTime);
  };
  opt("op_overhead", r.op_overhead);
  opt("backward_op_overhead", r.backward_op_overhead);
  opt("launch_overhead", r.launch_overhead);
  opt("collective_launch_overhead", r.collective_launch_overhead);
  opt("moe_layer_overhead", r.moe_layer_overhead);
  opt("fp8_module_overhead", r.fp8_module_overhead);
  opt("table_overhead", r.table_overhead);
  opt("sample_overhead", r.sample_overhead);
  opt("graph_launch_overhead", r.graph_launch_overhead);
  o.finish();
}

void apply_runtime(SystemSpec& s, RuntimeProfile& r) {
  r.host_scale = 1;
  r.host_scale_basis.clear();
  if (r.fit_host_speed > 0 && s.cpu.host_speed == r.fit_host_speed) {
    // the fit's own CPU speed: nothing to scale, nothing to say
  } else if (r.fit_host_speed > 0 && s.cpu.host_speed > 0) {
    r.host_scale = r.fit_host_speed / s.cpu.host_speed;
    r.host_scale_basis = fmt::format("x{:.2f} for the CPU: fitted on {}, run on {} (host speed {:.2f} / {:.2f}, {})", r.host_scale,
                                     r.fit_cpu, s.cpu.model, r.fit_host_speed, s.cpu.host_speed,
                                     s.cpu.host_speed_measured ? "measured" : "boost clock ratio");
  } else if (r.fit_host_speed > 0) {
    r.host_scale_basis = fmt::format("not scaled: the system declares no cpu (fitted on {})", r.fit_cpu);
  }
  const double k = r.host_scale;
  if (r.op_overhead) s.host.op_overhead = k * *r.op_overhead;
  if (r.backward_op_overhead) s.host.backward_op_overhead = k * *r.backward_op_overhead;
  if (r.launch_overhead) s.host.launch_overhead = k * *r.launch_overhead;
  if (r.collective_launch_overhead) s.host.collective_launch_overhead = k * *r.collective_launch_overhead;
  if (r.moe_layer_overhead) s.host.moe_layer_overhead = k * *r.moe_layer_overhead;
  if (r.fp8_module_overhead) s.host.fp8_module_overhead = k * *r.fp8_module_overhead;
  if (r.table_overhead) s.host.table_overhead = k * *r.table_overhead;
  if (r.sample_overhead) s.host.sample_overhead = k * *r.sample_overhead;
  if (r.graph_launch_overhead) s.host.graph_launch_overhead = k * *r.graph_launch_overhead;
}

std::vector<std::string> apply_runtime_stack(DlrmSpec& w, const RuntimeProfile& r) {
  std::vector<std::string> notes;
  const RuntimeDlrmStack& st = r.dlrm;
  if (st.dcn_cross) w.stack.dcn_cross = *st.dcn_cross;
  if (st.mlp_backward) w.stack.mlp_backward = *st.mlp_backward;
  if (st.fused_interaction) w.stack.fused_interaction = *st.fused_interaction;
  if (st.fused_embedding_optimizer) w.stack.fused_embedding_optimizer = *st.fused_embedding_optimizer;
  if (st.overlapped_reader) w.stack.overlapped_reader = *st.overlapped_reader;
  if (st.cuda_graphs) w.stack.cuda_graphs = *st.cuda_graphs;
  if (st.compiled_dense) w.stack.compiled_dense = *st.compiled_dense;
  if (st.async_weight_gradients) w.stack.async_weight_gradients = *st.async_weight_gradients;
  if (st.grouped_allreduce) w.stack.grouped_allreduce = *st.grouped_allreduce;
  if (st.hugectr_planner) w.stack.hugectr_planner = *st.hugectr_planner;
  if (st.gradient_dtype) w.stack.gradient_dtype = *st.gradient_dtype;
  if (st.embedding_output) w.stack.embedding_output = *st.embedding_output;
  auto pipeline_name = [](TrainPipeline p) {
    return p == TrainPipeline::kNone ? "none" : p == TrainPipeline::kSparseDist ? "sparse_dist" : "semi_sync";
  };
  if (st.pipeline && *st.pipeline != w.pipeline) {
    notes.push_back(fmt::format("pipeline {} (the workload says {})", pipeline_name(*st.pipeline), pipeline_name(w.pipeline)));
    w.pipeline = *st.pipeline;
  }
  if (st.mlp_dtype && *st.mlp_dtype != w.mlp_dtype) {
    notes.push_back(fmt::format("mlp_dtype {} (the workload says {})", dtype_name(*st.mlp_dtype), dtype_name(w.mlp_dtype)));
    w.mlp_dtype = *st.mlp_dtype;
  }
  if (st.embedding_update && *st.embedding_update != w.embedding_optimizer) {
    notes.push_back(fmt::format("embedding optimizer {} (the workload says {})", optimizer_name(*st.embedding_update),
                                optimizer_name(w.embedding_optimizer)));
    w.embedding_optimizer = *st.embedding_update;
  }
  if (st.embedding_dtype && *st.embedding_dtype != w.embedding_dtype) {
    notes.push_back(fmt::format("embedding dtype {} (the workload says {})", dtype_name(*st.embedding_dtype),
                                dtype_name(w.embedding_dtype)));
    w.embedding_dtype = *st.embedding_dtype;
  }
  return notes;
}

std::string outside_fit_regime(const RuntimeProfile& r, const std::string& workload, const std::string& gpu, int gpus,
                               std::int64_t batch) {
  const FitRegime& g = r.regime;
  if (g.empty()) return "";
  std::vector<std::string> out;
  if (workload != g.workload) out.push_back(fmt::format("a {} workload (fitted on {})", workload, g.workload));
  if (std::find(g.gpus.begin(), g.gpus.end(), gpu) == g.gpus.end())
    out.push_back(fmt::format("{} (fitted on {})", gpu, fmt::join(g.gpus, ", ")));
  if (gpus < g.min_gpus || gpus > g.max_gpus) out.push_back(fmt::format("{} GPUs (fitted on {}-{})", gpus, g.min_gpus, g.max_gpus));
  if (batch < g.min_batch || batch > g.max_batch)
    out.push_back(fmt::format("global batch {} (fitted on {}-{})", batch, g.min_batch, g.max_batch));
  return fmt::format("{}", fmt::join(out, ", "));
}

}  // namespace perfcast
