#include "model/predict.hpp"

#include <fmt/format.h>

#include "model/dlrm_builder.hpp"
#include "topology/collective_calibration.hpp"

namespace perfcast {

void apply_override_text(const std::string& text, JsonDocument& system, JsonDocument& workload, JsonDocument* plan) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set", text, "expected PATH=VALUE, e.g. workload.batch_size=4096");
  }
  const std::string path = text.substr(0, eq);
  const std::string value = text.substr(eq + 1);
  const auto dot = path.find_first_of(".[/");
  const std::string head = path.substr(0, dot);
  const std::string rest = dot == std::string::npos ? "" : path.substr(dot + (path[dot] == '.' ? 1 : 0));
  if (rest.empty()) throw ConfigError("--set", path, "expected a key after the file name, e.g. system.nodes");
  if (head == "system") return apply_override(system, rest, value);
  if (head == "workload") return apply_override(workload, rest, value);
  if (head == "plan") {
    if (!plan) throw ConfigError("--set", path, "no --plan was given");
    return apply_override(*plan, rest, value);
  }
  std::string msg = fmt::format("unknown file \"{}\"; a path starts with system., workload. or plan.", head);
  const std::string guess = closest_match(head, {"system", "workload", "plan"});
  if (!guess.empty()) msg += fmt::format(" (did you mean \"{}\"?)", guess);
  throw ConfigError("--set", path, msg);
}

std::unique_ptr<Prediction> predict(const PredictRequest& req) {
  JsonDocument system_doc = load_json_file(req.system);
  JsonDocument workload_doc = load_json_file(req.workload);
  std::optional<JsonDocument> plan_doc;
  if (req.plan) plan_doc = load_json_file(*req.plan);
  for (const auto& o : req.overrides) apply_override_text(o, system_doc, workload_doc, plan_doc ? &*plan_doc : nullptr);

  auto p = std::make_unique<Prediction>();
  p->overrides = req.overrides;
  p->system = parse_system(system_doc);
  p->workload = parse_workload(workload_doc);
  const int world = p->system.world_size();
  p->plan = plan_doc ? parse_plan(*plan_doc, p->workload, world) : default_plan(p->workload, world);
  p->graph = build_dlrm_graph(p->workload, p->plan, world);

  const auto comm = make_collective_model(p->system);
  p->collective_model = std::string(comm->name());
  if (!p->system.comms_calibration.empty()) p->collective_model += " (" + p->system.comms_calibration.string() + ")";
  Annotator annotator(p->system, *comm);
  p->timed = annotator.annotate(p->graph);
  SimulationOptions opts;
  opts.iterations = req.iterations;
  p->timeline = simulate(p->timed, p->system.host, opts);
  p->analysis = analyze_timeline(p->timeline, p->graph);
  p->memory = estimate_memory(p->workload, p->plan, p->system);
  for (const auto& m : p->memory) {
    if (!m.fits()) {
      p->warnings.push_back(fmt::format("rank {} needs {} of device memory but the GPU has {}", m.rank,
                                        format_bytes(m.total()), format_bytes(m.capacity)));
    }
  }
  if (p->warnings.size() > 4) {
    const auto extra = p->warnings.size() - 3;
    p->warnings.resize(3);
    p->warnings.push_back(fmt::format("... and {} more ranks do not fit", extra));
  }
  p->warnings.push_back("spec-derived predictors: no calibration for " + p->system.gpu.name + " yet");
  return p;
}

}  // namespace perfcast
