#pragma once
/// \file collective_calibration.hpp
/// Collective models calibrated from measured tables (nccl-tests logs, CSV lookup
/// tables). One fit per collective kind and fabric, single node:
///
///   T(S, n) = min over protocols p of [ a_p + b_p * steps(n) + S * F(n) * (c_p + d_p / n) ]
///
/// S in nccl-tests bytes, F(n) the bus factor, steps(n) the ring steps (2(n-1) for
/// all-reduce, n-1 otherwise). a_p is the fixed latency (launch included, as the harness
/// measured it), b_p the per-step latency, 1/c_p the protocol's bus bandwidth and d_p a
/// small-group correction. All coefficients are kept >= 0, so T is continuous and never
/// decreases as S grows. The fit minimises squared relative error by alternating between
/// assigning each sample to its fastest protocol and a weighted least-squares solve per
/// protocol (Eigen), starting from NCCL's constants.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "topology/collective.hpp"
#include "core/json_reader.hpp"
#include "topology/nccl_tests_parser.hpp"

namespace perfcast {

struct ProtocolTerms {
  std::string name;  ///< "LL", "LL128", "Simple"
  double a = 0;      ///< s
  double b = 0;      ///< s per ring step
  double c = 0;      ///< s per bus byte (1 / bus bandwidth)
  double d = 0;      ///< s * ranks per bus byte
};

struct FitQuality {
  std::size_t samples = 0;
  double geomean_abs_error = 0;  ///< over samples >= 1 MiB
  double max_abs_error = 0;
};

struct CollectiveFit {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::vector<ProtocolTerms> protocols;
  int min_ranks = 0, max_ranks = 0;  ///< calibrated range
  double min_bytes = 0, max_bytes = 0;
  FitQuality quality;

  /// Predicted time and the winning protocol's index.
  [[nodiscard]] double time(double bytes, int n, std::size_t* protocol = nullptr) const;
};

/// Ring steps of a collective over n ranks.
[[nodiscard]] int ring_steps(CollectiveKind kind, int n);

/// Fits one collective kind from its samples (all single-node, same kind). `init` gives
/// the starting protocols (NCCL constants for the system). Throws std::invalid_argument
/// when there are too few samples.
[[nodiscard]] CollectiveFit fit_collective(const std::vector<CollectiveSample>& samples, std::vector<ProtocolTerms> init);

/// Starting protocols from NCCL's constants and the system's link rate.
[[nodiscard]] std::vector<ProtocolTerms> nccl_initial_protocols(const SystemSpec& system);

/// Relative errors (pred / measured - 1) of a fit on samples, optionally only >= min_bytes.
[[nodiscard]] std::vector<double> fit_errors(const CollectiveFit& fit, const std::vector<CollectiveSample>& samples,
                                             double min_bytes = 0);

struct CommsCalibration {
  std::string fabric;
  std::string gpu;
  std::string nccl_version;
  std::string date;
  std::string commit;
  std::vector<std::string> sources;
  std::vector<CollectiveFit> fits;

  [[nodiscard]] const CollectiveFit* find(CollectiveKind kind) const;
};

/// Writes / reads a calibration file (schema "perfcast.comms_calibration" 1.x).
[[nodiscard]] std::string calibration_to_json(const CommsCalibration& c);
[[nodiscard]] CommsCalibration parse_calibration(const JsonDocument& doc);

/// The v1 model with calibrated fits where they apply: a collective of a calibrated kind
/// whose group lies inside one node uses the fit (its own launch cost included);
/// everything else falls back to the alpha-beta model.
class CalibratedCollectiveModel final : public CollectiveModel {
 public:
  CalibratedCollectiveModel(const SystemSpec& system, CommsCalibration calibration);
  [[nodiscard]] CollectiveEstimate estimate(const CollectiveDesc& desc, const RankGroup& group) const override;
  [[nodiscard]] std::string_view name() const override { return "calibrated-ring+nccl-alpha-beta-v2"; }

 private:
  const SystemSpec* system_;
  AlphaBetaCollectiveModel fallback_;
  CommsCalibration calibration_;
};

/// The collective model for a system: calibrated where the system names a calibration
/// file, spec-derived otherwise. Throws ConfigError for a broken calibration file.
[[nodiscard]] std::unique_ptr<CollectiveModel> make_collective_model(const SystemSpec& system);

}  // namespace perfcast
