#pragma once
/// \file collective_calibration.hpp
/// Collective models calibrated from measured tables (nccl-tests logs, CSV tables). One fit
/// per collective kind and node class (one node, or several), from any node count:
///
///   T(S, n) = min over protocols p of [ a_p + b_p * steps(n) + S * F(n) * (c_p + d_p / n)
///                                       + F(n) * sum_k r_pk * min(S, K_k) ]
///
/// S in nccl-tests bytes, F(n) the bus factor, steps(n) the ring steps (2(n-1) for
/// all-reduce, n-1 otherwise; n counts every rank of every node). a_p is the fixed latency
/// (launch included, as the harness measured it), b_p the per-step latency, 1/c_p the
/// protocol's bus bandwidth, d_p a small-group correction, and the r_pk terms NCCL's size
/// behaviour between latency and bandwidth: fewer channels and a pipeline that has not
/// filled yet make mid-size transfers slower than a + S/bandwidth; each r_pk adds a per-byte
/// cost only up to the knot K_k (1, 4, 16, 64, 256 MiB: kRampKnots), so the extra time
/// grows with S and then stays constant (docs/collectives-and-runtimes.md). Every
/// coefficient is >= 0 (Lawson-Hanson NNLS, core/nnls.hpp), so T is continuous and never
/// decreases as S grows. The fit minimises squared relative error by alternating between
/// assigning each sample to its fastest protocol and a weighted NNLS solve per protocol,
/// starting from NCCL's constants.

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "topology/collective.hpp"
#include "core/json_reader.hpp"
#include "topology/nccl_tests_parser.hpp"

namespace perfcast {

/// Knots of the size-ramp terms, bytes (S, nccl-tests convention): 1, 4, 16, 64, 256 MiB.
inline constexpr double kRampKnots[] = {1048576.0, 4194304.0, 16777216.0, 67108864.0, 268435456.0};
inline constexpr std::size_t kRampTerms = sizeof(kRampKnots) / sizeof(kRampKnots[0]);

struct ProtocolTerms {
  std::string name;  ///< "LL", "LL128", "Simple"
  double a = 0;      ///< s
  double b = 0;      ///< s per ring step
  double c = 0;      ///< s per bus byte (1 / bus bandwidth)
  double d = 0;      ///< s * ranks per bus byte
  /// s per bus byte below kRampKnots[k] (0: no ramp term)
  std::vector<double> ramp = std::vector<double>(kRampTerms, 0.0);
  /// Smallest size the protocol was fitted on, bytes; below it the protocol's time stays at
  /// its time there (0: fitted down to the smallest size measured, or not clamped).
  double from_bytes = 0;
};

struct FitQuality {
  std::size_t samples = 0;
  double geomean_abs_error = 0;  ///< in-sample, over samples >= 1 MiB
  double max_abs_error = 0;
  /// Held-out check (every third size left out of a refit, scored on sizes >= 64 KiB;
  /// check_held_out):
  /// geomean |error| of the refit and of the prior model on the same samples; held_out
  /// counts the scored samples (0: no check was possible).
  std::size_t held_out = 0;
  double heldout_geomean_abs_error = 0;
  double heldout_prior_geomean_abs_error = 0;
};

struct CollectiveFit {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  std::vector<ProtocolTerms> protocols;
  int min_ranks = 0, max_ranks = 0;  ///< calibrated range
  int min_nodes = 1, max_nodes = 1;  ///< node counts measured; one node and several are separate fits
  /// The algorithm the runs forced (NCCL_ALGO), as the spec-derived model names it ("nvls",
  /// "ring", "tree", "nvls_tree"), or "" for NCCL's own choice.
  std::string algorithm;
  double min_bytes = 0, max_bytes = 0;
  FitQuality quality;

  /// Predicted time and the winning protocol's index.
  [[nodiscard]] double time(double bytes, int n, std::size_t* protocol = nullptr) const;
};

/// Ring steps of a collective over n ranks.
[[nodiscard]] int ring_steps(CollectiveKind kind, int n);

/// Fits one collective kind from its samples (same kind; all on one node, or all on two
/// or more nodes). `init` gives the starting protocols (NCCL constants for the system).
/// Throws std::invalid_argument when there are too few samples or they mix node classes.
[[nodiscard]] CollectiveFit fit_collective(const std::vector<CollectiveSample>& samples, std::vector<ProtocolTerms> init);

/// Starting protocols from NCCL's constants and the system's link rate, for groups on one
/// node (nodes = 1) or across nodes (nodes >= 2: the network-bound ring rate).
[[nodiscard]] std::vector<ProtocolTerms> nccl_initial_protocols(const SystemSpec& system, int nodes = 1);

/// Predicted time of the model a calibration would replace, for one sample (s).
using PriorModel = std::function<double(const CollectiveSample&)>;

/// The held-out check: sorts the distinct sizes, leaves every third one (the 2nd, 5th, ...)
/// out (every 4th, 5th or 6th where fewer than 8 samples would remain), refits on the rest and scores the refit and `prior` on the left-out samples of
/// >= 64 KiB (all left-out samples where none is that large). Fills the held-out fields of
/// `quality`; leaves them 0 when fewer than 8 samples would remain to fit.
void check_held_out(FitQuality& quality, const std::vector<CollectiveSample>& samples,
                    const std::vector<ProtocolTerms>& init, const PriorModel& prior);

/// Geometric mean of |e| (each floored at 1e-9); 0 for none.
[[nodiscard]] double geomean_abs(const std::vector<double>& errors);

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

  /// The fit of `kind` for a group spanning `nodes` nodes (one-node fits for 1, multi-node
  /// fits for >= 2) of runs that forced `algorithm` ("" : NCCL's choice), or nullptr.
  [[nodiscard]] const CollectiveFit* find(CollectiveKind kind, int nodes = 1, const std::string& algorithm = "") const;
};

/// Writes / reads a calibration file (schema "perfcast.comms_calibration" 1.x; 1.1 adds
/// "nodes", the protocols' "ramp" and the held-out check; 1.0 files read as one-node fits).
[[nodiscard]] std::string calibration_to_json(const CommsCalibration& c);
[[nodiscard]] CommsCalibration parse_calibration(const JsonDocument& doc);

/// The spec-derived model with calibrated fits where they apply: a collective of a
/// calibrated kind and node class uses the fit of runs that left the algorithm to NCCL
/// (its own launch cost included); without one, each spec-derived candidate whose
/// algorithm was fitted from forced runs (NCCL_ALGO=NVLS, ...) takes the fitted time and
/// the fastest candidate wins, as NCCL picks. An all-to-allv uses the all-to-all fit at
/// the most loaded rank's bytes (send or receive, scaled by n / (n - 1) to the all-to-all
/// convention that counts the rank's own share). Everything else: the spec-derived model.
class CalibratedCollectiveModel final : public CollectiveModel {
 public:
  CalibratedCollectiveModel(const SystemSpec& system, CommsCalibration calibration);
  [[nodiscard]] CollectiveEstimate estimate(const CollectiveDesc& desc, const RankGroup& group) const override;
  /// Every candidate, fitted ones replacing their spec-derived algorithm (names end in
  /// "(calibrated)" or "(calibrated, extrapolated)"); empty for one rank.
  [[nodiscard]] std::vector<CollectiveEstimate> candidates(const CollectiveDesc& desc, const RankGroup& group) const;
  /// The estimate when the run forces `algorithm` (NCCL_ALGO): the fit of runs that forced
  /// it, else the spec-derived candidate of that name, else estimate().
  [[nodiscard]] CollectiveEstimate forced_estimate(const CollectiveDesc& desc, const RankGroup& group,
                                                   const std::string& algorithm) const;
  [[nodiscard]] std::string_view name() const override { return "calibrated+nccl-alpha-beta-v3"; }

 private:
  /// forced_only: skip the fit of NCCL's own choice (the per-algorithm candidates only).
  [[nodiscard]] std::vector<CollectiveEstimate> candidates_of(const CollectiveDesc& desc, const RankGroup& group,
                                                              bool forced_only) const;
  const SystemSpec* system_;
  AlphaBetaCollectiveModel fallback_;
  CommsCalibration calibration_;
};

/// The collective model for a system: calibrated where the system names a calibration
/// file, spec-derived otherwise. Throws ConfigError for a broken calibration file.
[[nodiscard]] std::unique_ptr<CollectiveModel> make_collective_model(const SystemSpec& system);

}  // namespace perfcast
