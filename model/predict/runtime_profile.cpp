#include "model/predict/runtime_profile.hpp"

#include <cctype>
#include <filesystem>

#include <fmt/format.h>

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

std::optional<RuntimeProfile> load_runtime_profile(const std::string& name, const std::string& workload_file, bool required) {
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-'))
      throw ConfigError("runtime", "", fmt::format("\"{}\": a runtime name is letters, digits, _ and -", name));
  }
  const auto dir = (std::filesystem::path(workload_file).parent_path() / ".." / "runtimes").lexically_normal();
  const auto path = dir / (name + ".json");
  if (!std::filesystem::exists(path)) {
    if (!required) return std::nullopt;
    throw ConfigError(path.string(), "", fmt::format("no runtime profile \"{}\" (looked in {})", name, dir.string()));
  }
  const JsonDocument doc = load_json_file(path);
  const JsonObject root(doc);
  root.require_schema("perfcast.runtime", 1);
  RuntimeProfile r;
  r.name = name;
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
    f.finish();
  }
  (void)root.find("sources");
  root.finish();
  return r;
}

void apply_runtime(SystemSpec& s, const RuntimeProfile& r) {
  if (r.op_overhead) s.host.op_overhead = *r.op_overhead;
  if (r.backward_op_overhead) s.host.backward_op_overhead = *r.backward_op_overhead;
  if (r.launch_overhead) s.host.launch_overhead = *r.launch_overhead;
  if (r.collective_launch_overhead) s.host.collective_launch_overhead = *r.collective_launch_overhead;
}

}  // namespace perfcast
