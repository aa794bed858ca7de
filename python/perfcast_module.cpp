// perfcast._perfcast: the C++ side of the Python package (python/perfcast/__init__.py
// wraps it). Every function takes plain strings and lists, runs the same library calls
// as the command line with the GIL released, and returns the JSON text the command line
// writes with --json; the wrapper turns it into dicts.
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/deadline.hpp"
#include "core/output_files.hpp"
#include "core/staged_output.hpp"
#include "model/commands/calibrate_command.hpp"
#include "model/commands/comm_command.hpp"
#include "model/commands/command_context.hpp"
#include "model/commands/convert_plan_command.hpp"
#include "model/commands/index_stats_command.hpp"
#include "model/commands/kernels_command.hpp"
#include "model/commands/list_command.hpp"
#include "model/commands/plan_command.hpp"
#include "model/commands/shard_command.hpp"
#include "model/commands/trace_commands.hpp"
#include "model/predict/predict.hpp"
#include "model/report/html_report.hpp"
#include "model/report/report.hpp"
#include "model/sim/simulator.hpp"

namespace py = pybind11;
using namespace perfcast;

namespace {

/// A configuration given as a path (text empty: read the file) or as JSON text produced
/// from a Python dict (`label` names it in error messages and anchors relative paths).
JsonDocument load_document(const std::string& label, const std::optional<std::string>& text) {
  if (!text) return load_json_file(label);
  JsonDocument doc;
  doc.file = label;
  try {
    doc.root = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(label, "", std::string("invalid JSON: ") + e.what());
  }
  return doc;
}

/// The `timeout=` argument ("" none, else a duration such as "30s") as seconds (0: none).
double timeout_seconds(const std::string& timeout) {
  return timeout.empty() ? 0.0 : parse_duration_option("timeout", timeout);
}

std::string predict_json(const std::string& system, const std::optional<std::string>& system_text, const std::string& workload,
                         const std::optional<std::string>& workload_text, const std::optional<std::string>& plan,
                         const std::optional<std::string>& plan_text, const std::vector<std::string>& overrides, int iterations,
                         bool all_micro_batches, bool text, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  if (iterations < 2 || iterations > 100) throw ConfigError("iterations", std::to_string(iterations), "expected 2 to 100");
  std::optional<JsonDocument> plan_doc;
  if (plan) plan_doc = load_document(*plan, plan_text);
  const auto p = predict_documents(load_document(system, system_text), load_document(workload, workload_text),
                                   std::move(plan_doc), overrides, iterations, SteadyStateOptions{!all_micro_batches});
  return text ? render_text(*p) : render_json(*p);
}

/// `perfcast plan --json -` and the text report; `system` and `workload` are file paths (the
/// search re-reads them for every candidate). Empty lists keep the command line's defaults.
std::pair<std::string, std::string> plan_json(const std::string& system, const std::string& workload,
                                              const std::vector<std::string>& overrides, int gpus,
                                              const std::vector<std::int64_t>& micro_batches, const std::vector<int>& cp,
                                              const std::vector<int>& vp, const std::vector<int>& ep,
                                              const std::vector<int>& expert_tp, int max_tp,
                                              const std::string& overlaps, double budget_s, unsigned threads, bool exhaustive,
                                              const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  PlanSearchRequest req;
  req.base.system = system;
  req.base.workload = workload;
  req.base.overrides = overrides;
  req.gpus = gpus;
  if (!micro_batches.empty()) req.space.micro_batches = micro_batches;
  req.space.context_parallel = cp;
  req.space.virtual_stages = vp;
  req.space.expert_parallel = ep;
  req.space.expert_tensor_parallel = expert_tp;
  req.space.max_tp = max_tp;
  if (overlaps == "off") req.space.overlap_grad_reduce = req.space.tp_comm_overlap = {false};
  else if (overlaps != "search") throw ConfigError("overlaps", overlaps, "expected \"search\" or \"off\"");
  req.timeout_s = budget_s;
  req.threads = threads;
  req.exhaustive = exhaustive;
  const PlanSearchResult r = search_parallel_plans(req);
  return {render_plan_json(r, req), render_plan_text(r, 10)};
}

std::string comm_json(const std::string& system, const std::optional<std::string>& system_text, const std::string& collective,
                      const std::string& sizes, int ranks, const std::string& nodes, bool text, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  CommRequest req;
  req.system = load_document(system, system_text);
  req.collective = collective;
  req.sizes = sizes;
  req.ranks = ranks;
  req.nodes = nodes;
  const CommOutcome r = run_comm(std::move(req));
  return text ? r.text : r.json;
}

std::pair<std::string, std::string> shard_json(const std::string& system, const std::optional<std::string>& system_text,
                                               const std::string& workload, const std::optional<std::string>& workload_text,
                                               const std::vector<std::string>& overrides, const std::string& budget,
                                               std::size_t evaluations, std::uint64_t seed, const std::string& plan_format,
                                               const std::string& memory_tiers, const std::string& dense_layout,
                                               const std::string& module_path, const std::string& timeout) {
  py::gil_scoped_release release;
  (void)timeout_seconds(timeout);  // checked here; the search stops in time for its report (shard --timeout)
  ShardRequest req;
  req.plan_format = plan_format_from_name(plan_format);
  req.memory_tiers = memory_tiers;
  req.dense_layout = dense_layout;
  req.module_path = module_path;
  req.system = load_document(system, system_text);
  req.workload = load_document(workload, workload_text);
  req.overrides = overrides;
  req.budget = budget;
  req.evaluations = evaluations;
  req.seed = seed;
  req.timeout = timeout;
  ShardOutcome r = run_shard(std::move(req));
  return {std::move(r.json), std::move(r.text)};
}

/// convert-plan: the plan's file text in `plan_format` ("" = as read).
std::string convert_plan_json(const std::string& system, const std::optional<std::string>& system_text, const std::string& workload,
                              const std::optional<std::string>& workload_text, const std::string& plan,
                              const std::optional<std::string>& plan_text, const std::vector<std::string>& overrides,
                              const std::string& plan_format, const std::string& module_path) {
  py::gil_scoped_release release;
  ConvertPlanRequest req;
  req.system = load_document(system, system_text);
  req.workload = load_document(workload, workload_text);
  req.plan = load_document(plan, plan_text);
  req.overrides = overrides;
  req.plan_format = plan_format;
  req.module_path = module_path;
  return convert_plan(std::move(req)).plan;
}

std::string trace_stats_json(const std::vector<std::string>& files, int top, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  return run_trace_stats(TraceStatsRequest{files, top}).json;
}

std::string index_stats_json(const IndexStatsRequest& req, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  return run_index_stats(req).json;
}

std::string kernels_json(const KernelsRequest& req, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  KernelsOutcome r = run_kernels(req);
  write_outputs(r.calibrations);  // the fitted calibrations (fit=), whole or none
  return std::move(r.json);
}

/// A calibration's result for the Python side: (the --json document or "" where the fit
/// was refused before one, the errors that refuse it, the warnings). The calibration file
/// is written (whole or not at all) unless the fit was refused.
using CalibrateResult = std::tuple<std::string, std::vector<std::string>, std::vector<std::string>>;

CalibrateResult finish_calibration(CalibrateOutcome r) {
  if (!r.content.empty()) write_outputs({{r.out, r.content}});
  return {std::move(r.json), std::move(r.errors), std::move(r.warnings)};
}

CalibrateResult calibrate_comms_json(const CalibrateCommsRequest& req, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  return finish_calibration(calibrate_comms(req));
}

CalibrateResult calibrate_kernels_json(const CalibrateKernelsRequest& req, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  return finish_calibration(calibrate_kernels(req));
}

CalibrateResult calibrate_runtime_json(const CalibrateRuntimeRequest& req, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  check_output_targets({req.out});
  return finish_calibration(calibrate_runtime(req));
}

std::string list_json(const std::string& systems) {
  py::gil_scoped_release release;
  return run_list(systems).json;
}

std::string report_html(const std::vector<std::string>& files, const std::string& title) {
  py::gil_scoped_release release;
  std::vector<ReportInput> inputs;
  for (const auto& f : files) inputs.push_back(load_report_input(f));
  return render_html_report(inputs, title);
}

std::pair<std::string, std::string> import_json(const std::vector<std::string>& kineto, const std::vector<std::string>& et,
                                                const std::string& name, std::int64_t batch, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  if (batch < 0) throw ConfigError("batch", std::to_string(batch), "expected 0 (unknown) or more samples");
  ImportRequest req{kineto, et, name, batch};
  ImportOutcome r = run_import(req);
  return {std::move(r.workload), std::move(r.text)};
}

std::pair<std::string, std::string> replay_json(const std::vector<std::string>& kineto, const std::vector<std::string>& et,
                                                const std::string& host, const std::string& kernels, bool infer_waits,
                                                const std::string& system, const std::string& calibration,
                                                const std::string& ranks, const std::string& steps, const std::string& timeout) {
  py::gil_scoped_release release;
  const ScopedDeadline limit(timeout_seconds(timeout), "timeout=" + timeout);
  ReplayRequest req;
  req.kineto = kineto;
  req.et = et;
  if (host == "measured") req.options.host = ReplayHostModel::kMeasured;
  else if (host == "mean") req.options.host = ReplayHostModel::kMean;
  else throw ConfigError("host", host, "expected \"measured\" or \"mean\"");
  if (kernels == "measured") req.options.kernels = ReplayKernels::kMeasured;
  else if (kernels == "predicted") req.options.kernels = ReplayKernels::kPredicted;
  else throw ConfigError("kernels", kernels, "expected \"measured\" or \"predicted\"");
  req.options.infer_waits = infer_waits;
  req.system = system;
  req.calibration = calibration;
  req.ranks = ranks;
  req.steps = steps;
  ReplayOutcome r = run_replay(std::move(req));
  return {std::move(r.json), std::move(r.text)};
}

}  // namespace

PYBIND11_MODULE(_perfcast, m) {
  m.doc() = "perfcast's C++ core; use the perfcast package, which returns dicts";
  // perfcast.ConfigError(message, file, path) and perfcast.SimulationError live in the
  // Python package; the package imports this module after defining them.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      py::object cls = py::module_::import("perfcast").attr("ConfigError");
      py::object err = cls(std::string(e.what()), e.file(), e.pointer());
      PyErr_SetObject(cls.ptr(), err.ptr());
    } catch (const std::filesystem::filesystem_error& e) {
      // A path the caller named that the system cannot look up (too long, a loop of links).
      py::object cls = py::module_::import("perfcast").attr("ConfigError");
      const std::string message = e.path1().string() + ": " + e.code().message() + "; expected a path this system can open";
      py::object err = cls(message, e.path1().string(), std::string());
      PyErr_SetObject(cls.ptr(), err.ptr());
    } catch (const SimulationError& e) {
      py::object cls = py::module_::import("perfcast").attr("SimulationError");
      PyErr_SetObject(cls.ptr(), cls(std::string(e.what())).ptr());
    } catch (const DeadlineExceeded& e) {
      PyErr_SetString(PyExc_TimeoutError, e.what());  // timeout= passed before a result
    } catch (const OutputError& e) {
      PyErr_SetString(PyExc_OSError, e.what());  // an output file that could not be written
    }
  });
  m.def("predict", &predict_json, py::arg("system"), py::arg("system_text"), py::arg("workload"), py::arg("workload_text"),
        py::arg("plan"), py::arg("plan_text"), py::arg("overrides"), py::arg("iterations"), py::arg("all_micro_batches"),
        py::arg("text"), py::arg("timeout"));
  m.def("comm", &comm_json, py::arg("system"), py::arg("system_text"), py::arg("collective"), py::arg("sizes"), py::arg("ranks"),
        py::arg("nodes"), py::arg("text"), py::arg("timeout"));
  m.def("shard", &shard_json, py::arg("system"), py::arg("system_text"), py::arg("workload"), py::arg("workload_text"),
        py::arg("overrides"), py::arg("budget"), py::arg("evaluations"), py::arg("seed"), py::arg("plan_format"),
        py::arg("memory_tiers"), py::arg("dense_layout"), py::arg("module_path"), py::arg("timeout"));
  m.def("convert_plan", &convert_plan_json, py::arg("system"), py::arg("system_text"), py::arg("workload"),
        py::arg("workload_text"), py::arg("plan"), py::arg("plan_text"), py::arg("overrides"), py::arg("plan_format"),
        py::arg("module_path"));
  m.def("plan", &plan_json, py::arg("system"), py::arg("workload"), py::arg("overrides"), py::arg("gpus"),
        py::arg("micro_batches"), py::arg("cp"), py::arg("vp"), py::arg("ep"), py::arg("expert_tp"), py::arg("max_tp"),
        py::arg("overlaps"),
        py::arg("budget_s"), py::arg("threads"), py::arg("exhaustive"), py::arg("timeout"));
  m.def("report", &report_html, py::arg("files"), py::arg("title"));
  m.def("trace_stats", &trace_stats_json, py::arg("files"), py::arg("top"), py::arg("timeout"));
  m.def(
      "index_stats",
      [](const std::string& indices, const std::string& offsets, const std::string& lengths, const std::string& locality,
         const std::string& stats, int tables, std::int64_t batch, const std::vector<std::int64_t>& rows, const std::string& dtype,
         std::int64_t dim, const std::string& weight_dtype, const std::string& system, bool as_distribution, bool histogram,
         const std::string& timeout) {
        IndexStatsRequest r{indices, offsets, lengths, locality, stats, tables, batch, rows, dtype, dim, weight_dtype, system,
                            as_distribution, histogram};
        return index_stats_json(r, timeout);
      },
      py::arg("indices"), py::arg("offsets"), py::arg("lengths"), py::arg("locality"), py::arg("stats"), py::arg("tables"),
      py::arg("batch"), py::arg("rows"), py::arg("dtype"), py::arg("dim"), py::arg("weight_dtype"), py::arg("system"),
      py::arg("as_distribution"), py::arg("histogram"), py::arg("timeout"));
  m.def(
      "kernels",
      [](const std::vector<std::string>& systems, const std::vector<std::string>& gemm, const std::vector<std::string>& attention,
         const std::vector<std::string>& memory_bound, const std::vector<std::string>& embedding,
         const std::vector<std::string>& measurements, const std::string& calibration, bool spec_derived,
         bool leave_one_source_out, const std::vector<std::string>& fit, const std::string& fit_dir, const std::string& note,
         const std::string& timeout) {
        KernelsRequest r;
        r.fit_systems = fit;
        r.fit_dir = fit_dir;
        r.note = note;
        r.systems = systems;
        r.gemm = gemm;
        r.attention = attention;
        r.memory_bound = memory_bound;
        r.embedding = embedding;
        r.measurements = measurements;
        r.calibration = calibration;
        r.spec_derived = spec_derived;
        r.leave_one_source_out = leave_one_source_out;
        return kernels_json(r, timeout);
      },
      py::arg("systems"), py::arg("gemm"), py::arg("attention"), py::arg("memory_bound"), py::arg("embedding"),
      py::arg("measurements"), py::arg("calibration"), py::arg("spec_derived"), py::arg("leave_one_source_out"), py::arg("fit"),
      py::arg("fit_dir"), py::arg("note"), py::arg("timeout"));
  m.def(
      "calibrate_comms",
      [](const std::string& system, const std::vector<std::string>& logs, const std::string& collective, int ranks,
         const std::string& out, bool leave_one_out, bool leave_one_source_out, bool force, const std::vector<std::string>& only,
         const std::string& timeout) {
        CalibrateCommsRequest r{system, logs, collective, ranks, out, leave_one_out, leave_one_source_out, force, only};
        return calibrate_comms_json(r, timeout);
      },
      py::arg("system"), py::arg("logs"), py::arg("collective"), py::arg("ranks"), py::arg("out"), py::arg("leave_one_out"),
      py::arg("leave_one_source_out"), py::arg("force"), py::arg("only"), py::arg("timeout"));
  m.def(
      "calibrate_kernels",
      [](const std::string& system, const std::vector<std::string>& measurements, const std::string& out,
         const std::vector<std::string>& families, const std::string& note, const std::string& timeout) {
        CalibrateKernelsRequest r{system, measurements, out, families, note};
        return calibrate_kernels_json(r, timeout);
      },
      py::arg("system"), py::arg("measurements"), py::arg("out"), py::arg("families"), py::arg("note"), py::arg("timeout"));
  m.def(
      "calibrate_runtime",
      [](const std::string& system, const std::string& measurements, const std::string& out, const std::string& base, bool force,
         const std::string& timeout) {
        CalibrateRuntimeRequest r{system, measurements, out, base, force};
        return calibrate_runtime_json(r, timeout);
      },
      py::arg("system"), py::arg("measurements"), py::arg("out"), py::arg("base"), py::arg("force"), py::arg("timeout"));
  m.def("list", &list_json, py::arg("systems"));
  m.def("import_trace", &import_json, py::arg("kineto"), py::arg("et"), py::arg("name"), py::arg("batch"), py::arg("timeout"));
  m.def("replay", &replay_json, py::arg("kineto"), py::arg("et"), py::arg("host"), py::arg("kernels"), py::arg("infer_waits"),
        py::arg("system"), py::arg("calibration"), py::arg("ranks"), py::arg("steps"), py::arg("timeout"));
}
