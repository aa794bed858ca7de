#pragma once
/// \file predict.hpp
/// The one pipeline: read configs (with what-if overrides) -> build the execution graph
/// -> annotate with predictors -> simulate -> analyze. Every command is this or a loop
/// around it.

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/sim/annotate.hpp"
#include "model/graph/execution_graph.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/graph/sharding_plan.hpp"
#include "model/sim/simulator.hpp"
#include "model/sim/timeline_analysis.hpp"
#include "model/predict/provenance.hpp"
#include "model/predict/runtime_profile.hpp"
#include "model/predict/steady_state.hpp"
#include "model/predict/workload.hpp"
#include "model/graph/workload_spec.hpp"
#include "topology/collective.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct PredictRequest {
  std::filesystem::path system;
  std::filesystem::path workload;
  std::optional<std::filesystem::path> plan;
  /// What-if edits "PATH=VALUE" where PATH starts with "system.", "workload." or "plan.".
  std::vector<std::string> overrides;
  int iterations = 3;
  /// Transformers: extrapolate the steady state past a few micro-batches (steady_state.hpp);
  /// off where every simulated event is needed (a timeline trace).
  SteadyStateOptions steady_state;
};

/// How a Transformer prediction's figures were obtained when its steady state was
/// extrapolated (steady_state.hpp).
struct SteadyStateExtrapolation {
  std::int64_t micro_batches = 0;            ///< the workload's, per pipeline
  std::array<std::int64_t, 3> simulated{};  ///< the counts simulated
  std::int64_t step = 1;                     ///< micro-batches per schedule period
  Seconds per_step = 0;                      ///< iteration time one step adds, s
};

/// Everything a report needs. Not copyable: the timed graph points into `graph`.
struct Prediction {
  SystemSpec system;
  Workload workload;  ///< DlrmSpec or TransformerSpec (parallelism resolved)
  ShardingPlan plan;  ///< DLRM only (empty for transformers)
  ExecutionGraph graph;
  TimedGraph timed;
  Timeline timeline;
  TimelineAnalysis analysis;
  std::vector<RankMemory> memory;
  std::string collective_model;
  std::string kernel_calibration;  ///< calibration file used, or "" (spec-derived predictors)
  std::vector<ProvenanceEntry> provenance;  ///< calibrated or spec-derived, per family (provenance.hpp)
  std::optional<RuntimeProfile> runtime;    ///< the runtime profile whose host costs were applied, if any
  /// Set when the steady state was extrapolated: `graph`, `timed` and `timeline` (but its
  /// iteration_time) are then those of the first simulated count, `analysis` is extrapolated.
  std::optional<SteadyStateExtrapolation> steady_state;
  std::vector<std::string> overrides;
  std::vector<std::string> warnings;

  Prediction() = default;
  Prediction(const Prediction&) = delete;
  Prediction& operator=(const Prediction&) = delete;
};

/// Throws ConfigError for bad input, SimulationError for graphs that cannot run.
[[nodiscard]] std::unique_ptr<Prediction> predict(const PredictRequest& request);

/// predict() on documents already read (files, or configs built in memory such as the
/// Python package's dicts): applies `overrides` ("PATH=VALUE") to them, then runs the
/// pipeline for the workload's model. Relative file references inside the system (its
/// "gpu", a comms calibration) and the kernel calibration lookup resolve against the
/// folder of `system.file`.
[[nodiscard]] std::unique_ptr<Prediction> predict_documents(JsonDocument system_doc, JsonDocument workload_doc,
                                                            std::optional<JsonDocument> plan_doc,
                                                            std::vector<std::string> overrides, int iterations = 3,
                                                            SteadyStateOptions steady_state = {});

/// The pipeline on specs already read (the sharding search's final report uses it).
[[nodiscard]] std::unique_ptr<Prediction> predict_parsed(SystemSpec system, DlrmSpec workload, ShardingPlan plan,
                                                         std::vector<std::string> overrides = {}, int iterations = 3);

/// The pipeline for a Transformer workload already read; resolves its parallelism
/// against the system (ConfigError when tp x pp x dp differs from the GPU count).
[[nodiscard]] std::unique_ptr<Prediction> predict_transformer(SystemSpec system, TransformerSpec workload,
                                                              std::vector<std::string> overrides = {}, int iterations = 3,
                                                              SteadyStateOptions steady_state = {});

/// The models a prediction annotates with: the system's collective model (calibrated when
/// the system names a collective calibration) and the kernel calibration of its GPU, found
/// by name beside the system files (configs/calibration/<gpu>.json), or none (spec-derived
/// predictors). The annotator points into `calibration`: keep this alive while annotating.
struct PredictionModels {
  std::unique_ptr<CollectiveModel> comm;
  std::optional<KernelCalibration> calibration;
};

/// Loads the models for `p.system` and records their names in `p.collective_model` and
/// `p.kernel_calibration`, and how each family was obtained in `p.provenance`. Throws ConfigError for an unreadable calibration file.
[[nodiscard]] PredictionModels load_prediction_models(Prediction& p);

/// The kernel calibration `predict` applies on `system`: configs/calibration/<gpu>.json
/// next to the system file's folder, when it exists (its path in *path, if given).
[[nodiscard]] std::optional<KernelCalibration> load_system_kernel_calibration(const SystemSpec& system,
                                                                             std::string* path = nullptr);

/// The warning for a prediction without a kernel calibration: the GPU, the path looked
/// at, and how to name a file.
[[nodiscard]] std::string missing_calibration_warning(const SystemSpec& system);

/// Splits "PATH=VALUE" and applies it to the matching document. Host costs
/// (`system.host.KEY` or `runtime.host.KEY`) go to `host` when given: a document
/// {"host": {...}} that apply_host_overrides lays over the runtime profile's values, so
/// that a --set value wins over both files; without `host` they go to the system
/// document's `host` object (created when absent). Changing the system's size or GPU
/// (`system.nodes`, `system.gpus_per_node`, `system.gpu`) appends "[--set KEY=VALUE]" to the
/// system's name, so reports never show a name that describes another machine. Throws ConfigError.
void apply_override_text(const std::string& text, JsonDocument& system, JsonDocument& workload, JsonDocument* plan,
                         JsonDocument* host = nullptr);

/// Applies the host costs collected by apply_override_text to `system.host` (no-op for an
/// empty document).
void apply_host_overrides(SystemSpec& system, const JsonDocument& host);

/// Rethrows `e` as an error of the --set option when it is about a value that an override
/// in `overrides` put into `doc_file` (same JSON pointer, or one inside the other), so that
/// the message names the --set and not only the file the value never came from; other
/// errors of `doc_file` are rethrown with the overrides in force appended (one may be the
/// cause), or unchanged when there are none. `doc_prefix` is "system" or "workload".
[[noreturn]] void rethrow_blaming_overrides(const ConfigError& e, const std::vector<std::string>& overrides,
                                            const std::string& doc_prefix, const std::string& doc_file);

}  // namespace perfcast
