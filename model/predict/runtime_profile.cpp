#include "model/predict/runtime_profile.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
    if (!std::filesystem::exists(path)) throw ConfigError(name, "", "no such runtime profile file");
  } else {
    if (!is_runtime_name(name))
      throw ConfigError("runtime", "", fmt::format("\"{}\": a runtime name is letters, digits, _ and - (or a path to a .json file)", name));
    const auto dirs = runtime_search_dirs(workload_file, system_file);
    for (const auto& d : dirs) {
      if (std::filesystem::exists(d / (name + ".json"))) {
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
  host.finish();
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
    f.finish();
  }
  (void)root.find("sources");
  root.finish();
  return r;
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
}

}  // namespace perfcast
