#include "validation/validate_harness.hpp"

#include "core/limits.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "model/predict/predict.hpp"
#include "model/graph/sharding_plan.hpp"
#include "model/graph/transformer_spec.hpp"
#include "core/json_reader.hpp"
#include "core/json_text.hpp"

namespace perfcast::validation {
namespace {

constexpr const char* kSchema = "perfcast.validation_result";

std::string percent(double x) { return fmt::format("{:+.2f}%", 100.0 * x); }

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

}  // namespace

HarnessResult run_validation(const SystemSpec& system, const HarnessOptions& options, const MeasureFn& measure,
                             std::ostream* jsonl, const Provenance& provenance,
                             const std::function<void(const ConfigResult&, int)>& on_result) {
  if (options.configs < 0 || options.first_index < 0) throw std::invalid_argument("run_validation: negative config count or index");
  HarnessResult out;
  std::vector<double> errors;
  for (int n = 0; n < options.configs; ++n) {
    const int i = options.first_index + n;
    ConfigResult r;
    r.config = generate_dlrm_config(system, options.seed, i, options.generator);
    r.description = describe_config(r.config);
    {
      const auto p = predict_parsed(system, r.config.spec, r.config.plan);
      r.predicted_s = p->timeline.iteration_time;
      r.kernel_calibration = p->kernel_calibration;
    }
    if (measure) {
      try {
        r.measured = measure(r.config);
        if (!(r.measured->median_s > 0)) throw std::runtime_error("the measured iteration time is not positive");
        r.error = relative_error(r.predicted_s, r.measured->median_s);
        errors.push_back(*r.error);
      } catch (const std::exception& e) {
        r.measured.reset();
        r.error.reset();
        r.failure = e.what();
        ++out.failed;
      }
      if (jsonl) {
        *jsonl << json_text(result_line(r, system, options, provenance)) << '\n';
        jsonl->flush();
        if (!*jsonl) throw std::runtime_error("cannot write the result line of config #" + std::to_string(i));
      }
    }
    out.results.push_back(std::move(r));
    if (on_result) on_result(out.results.back(), n + 1);
  }
  out.summary = summarize_errors(errors);
  return out;
}

nlohmann::json result_line(const ConfigResult& r, const SystemSpec& system, const HarnessOptions& options,
                           const Provenance& provenance) {
  const Measured* m = r.measured ? &*r.measured : nullptr;
  const auto pick = [](const std::string& measured, const std::string& given) { return measured.empty() ? given : measured; };
  nlohmann::json j = {
      {"schema", kSchema},
      {"schema_version", "1.0"},
      {"index", r.config.index},
      {"seed", r.config.seed},
      {"system", system.file.empty() ? system.name : system.file},
      {"gpu", m ? pick(m->gpu, provenance.gpu) : provenance.gpu},
      {"driver", m ? pick(m->driver, provenance.driver) : provenance.driver},
      {"cuda", m ? pick(m->cuda, provenance.cuda) : provenance.cuda},
      {"date", provenance.date},
      {"commit", provenance.commit},
      {"version", provenance.version},
      {"description", r.description},
      {"plan", r.config.plan_name},
      {"config", r.config.workload_json},
      {"predicted_s", r.predicted_s},
      {"measured_s", m ? nlohmann::json(m->median_s) : nlohmann::json(nullptr)},
      {"error", r.error ? nlohmann::json(*r.error) : nlohmann::json(nullptr)},
      {"kernel_calibration", r.kernel_calibration},
  };
  if (m) {
    j["measurement"] = {{"median_s", m->median_s}, {"p10_s", m->p10_s},       {"p90_s", m->p90_s},
                        {"warmup", options.warmup}, {"iterations", options.iterations}, {"world", m->world},
                        {"timer", m->timer},        {"first_loss", m->first_loss}, {"last_loss", m->last_loss}};
  } else if (!r.failure.empty()) {
    j["failure"] = r.failure;
  }
  return j;
}

std::string format_result(const ConfigResult& r) {
  std::string s = fmt::format("#{:<3} {}\n      predicted {:>10}", r.config.index, r.description, format_time(r.predicted_s));
  if (r.measured) {
    s += fmt::format("  measured {:>10} (p10 {}, p90 {})  error {}", format_time(r.measured->median_s),
                     format_time(r.measured->p10_s), format_time(r.measured->p90_s), percent(r.error.value_or(0)));
  } else if (!r.failure.empty()) {
    s += "  measurement failed: " + r.failure;
  }
  return s;
}

std::string format_summary(const ErrorSummary& s) {
  if (s.count == 0) return "no measured configs";
  return fmt::format("{:.2f}% geomean |error|, MAPE {:.2f}%, max {:.2f}%, bias {} ({} configs)", 100.0 * s.geomean_abs,
                     100.0 * s.mape, 100.0 * s.max_abs, percent(s.mean_signed), s.count);
}

std::vector<ResultFileSummary> summarize_result_files(const std::vector<std::filesystem::path>& files) {
  std::vector<ResultFileSummary> out;
  for (const auto& path : files) {
    ResultFileSummary f;
    f.file = path.string();
    for_each_json_line(path, "one validation result object per line", [&](const JsonDocument& doc) {
      if (!doc.root.is_object()) throw ConfigError(doc.file, "", "expected a JSON object");
      const JsonObject root(doc);
      root.require_schema(kSchema, 1);
      ++f.lines;
      const double predicted = root.at("predicted_s").as_number();
      // Within the time range of core/limits.hpp: a subnormal time (5e-324 s) would make the
      // error infinite.
      if (!(predicted >= limits::kMinTime && predicted <= limits::kMaxTime))
        root.fail("predicted_s", fmt::format("expected seconds in [{:g}, {:g}]", limits::kMinTime, limits::kMaxTime));
      const auto measured = root.at("measured_s");
      if (auto g = root.find("gpu")) add_unique(f.gpus, g->as_string());
      if (auto s = root.find("system")) add_unique(f.systems, s->as_string());
      if (measured.raw().is_null()) {
        ++f.failed;
        return;
      }
      const double m = measured.as_number();
      if (!(m >= limits::kMinTime && m <= limits::kMaxTime))
        root.fail("measured_s", fmt::format("expected seconds in [{:g}, {:g}] (or null for a failed measurement)",
                                            limits::kMinTime, limits::kMaxTime));
      f.errors.push_back(relative_error(predicted, m));
    });
    f.summary = summarize_errors(f.errors);
    out.push_back(std::move(f));
  }
  return out;
}

std::string render_file_summaries(const std::vector<ResultFileSummary>& files) {
  std::string s;
  std::vector<double> all;
  std::size_t failed = 0;
  for (const auto& f : files) {
    std::string where;
    for (const auto& g : f.gpus) where += (where.empty() ? "" : ", ") + g;
    s += fmt::format("{}: {}{}{}\n", f.file, format_summary(f.summary), where.empty() ? "" : " on " + where,
                     f.failed ? fmt::format(", {} failed", f.failed) : "");
    all.insert(all.end(), f.errors.begin(), f.errors.end());
    failed += f.failed;
  }
  if (files.size() > 1) {
    s += fmt::format("all: {}{}\n", format_summary(summarize_errors(all)), failed ? fmt::format(", {} failed", failed) : "");
  }
  return s;
}

std::vector<PytorchComparison> compare_pytorch_files(const SystemSpec& system,
                                                     const std::vector<std::filesystem::path>& files) {
  if (system.world_size() != 1) {
    throw ConfigError(system.file, "/gpus_per_node",
                      fmt::format("the PyTorch benchmarks run on one GPU; compare them on a one-GPU system (this one has {})",
                                  system.world_size()));
  }
  std::vector<PytorchComparison> out;
  for (const auto& path : files) {
    for_each_json_line(path, "one PyTorch result object per line", [&](const JsonDocument& line) {
      const std::string& where = line.file;
      const nlohmann::json& j = line.root;
      const auto schema = j.is_object() ? j.find("schema") : j.end();
      if (!j.is_object() || schema == j.end() || !schema->is_string() || *schema != "perfcast.pytorch_result") {
        throw ConfigError(where, "/schema", "expected \"perfcast.pytorch_result\" (written by validation/pytorch/*_bench.py)");
      }
      const auto measured = j.find("measured_s");
      if (measured == j.end() || !measured->is_number() || !(measured->get<double>() >= limits::kMinTime) ||
          !(measured->get<double>() <= limits::kMaxTime)) {
        throw ConfigError(where, "/measured_s",
                          fmt::format("expected seconds in [{:g}, {:g}]", limits::kMinTime, limits::kMaxTime));
      }
      if (!j.contains("config") || !j.at("config").is_object()) throw ConfigError(where, "/config", "expected the workload object");
      PytorchComparison c;
      c.source = where;
      c.measured_s = measured->get<double>();
      // Errors inside the workload name the line and the path inside "config".
      JsonDocument doc{j.at("config"), where + " /config"};
      const JsonObject root(doc);
      c.model = root.at("model").as_enum({"dlrm", "transformer"});
      if (c.model == "dlrm") {
        const DlrmSpec w = parse_workload(doc);
        c.workload = w.name;
        c.predicted_s = predict_parsed(system, w, default_plan(w, 1))->timeline.iteration_time;
      } else {
        TransformerSpec w = parse_transformer(doc);
        c.workload = w.name;
        c.predicted_s = predict_transformer(system, w)->timeline.iteration_time;
      }
      c.error = relative_error(c.predicted_s, c.measured_s);
      out.push_back(std::move(c));
    });
  }
  return out;
}

std::string safe_file_name(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0) {
      out += static_cast<char>(std::tolower(c));
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out.empty() ? "unknown" : out;
}

}  // namespace perfcast::validation
