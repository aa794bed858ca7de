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

/// A multi-node fit in NCCL's structure (model "nccl-structured"): the spec-derived time
/// across NVLink domains is launch + NCCL's latency + bytes / NCCL's bandwidth
/// (AlphaBetaCollectiveModel::terms); the fit scales each part,
///
///   T = fixed + latency x L(N) + transfer x X(S, N) + sum_k ramp_k x X(S, N) x min(S, K_k) / S
///
/// with L and X recomputed for the group at hand (N: its NVLink domains, its algorithm as
/// NCCL chooses it), so the fit's per-hop latency and per-byte terms carry to node counts it
/// never saw (a ring's 2(N-1) network steps, a tree's 2 log2 N hops, NCCL's per-node-count
/// bandwidths), instead of reusing the fitted times. The ramp terms are the extra cost of
/// mid sizes up to the knots K (kRampKnots). All scales >= 0 (NNLS on relative error); the
/// spec-derived model is fixed = launch, latency = transfer = 1, no ramp.
struct StructuredScales {
  /// The protocol of NCCL's choice these scales apply to ("LL", "LL128", "Simple"); "*":
  /// every protocol (a fit whose protocols had too few samples each). Sizes whose protocol
  /// has no scales stay spec-derived.
  std::string protocol = "*";
  double fixed = 0;     ///< s
  double latency = 1;   ///< x NCCL's latency (+ tier latency)
  double transfer = 1;  ///< x bytes / NCCL's bandwidth
  std::vector<double> ramp = std::vector<double>(kRampTerms, 0.0);  ///< x transfer below knot k
};

struct CollectiveFit {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  /// "" : per-protocol terms (`protocols`, one node, and multi-node files of schema 1.1);
  /// "nccl-structured": `scales` (multi-node fits from schema 1.2 on).
  std::string model;
  std::vector<StructuredScales> scales;  ///< per protocol of NCCL's choice (structured fits)
  /// Node counts (NVLink domains) the fit's samples spanned, increasing.
  std::vector<int> node_counts;
  std::vector<ProtocolTerms> protocols;
  int min_ranks = 0, max_ranks = 0;  ///< calibrated range
  int min_nodes = 1, max_nodes = 1;  ///< node counts measured; one node and several are separate fits
  /// The algorithm the runs forced (NCCL_ALGO), as the spec-derived model names it ("nvls",
  /// "ring", "tree", "nvls_tree"), or "" for NCCL's own choice.
  std::string algorithm;
  double min_bytes = 0, max_bytes = 0;
  FitQuality quality;

  /// Predicted time and the winning protocol's index (per-protocol fits).
  [[nodiscard]] double time(double bytes, int n, std::size_t* protocol = nullptr) const;
  /// Predicted time of a structured fit from the spec-derived terms of the group at hand.
  [[nodiscard]] double structured_time(const AlphaBetaCollectiveModel::Terms& terms, double bytes) const;
  [[nodiscard]] bool structured() const { return model == "nccl-structured"; }
  /// The scales for a protocol (or the "*" scales), nullptr when it was not fitted.
  [[nodiscard]] const StructuredScales* scales_for(const std::string& protocol) const;
  /// True when `nodes` is one of the node counts the fit saw (files without the list: its
  /// [min_nodes, max_nodes] range).
  [[nodiscard]] bool fitted_at(int nodes) const;
};

/// The spec-derived terms of a sample (its group on the system grown to its node count).
using TermsOf = std::function<AlphaBetaCollectiveModel::Terms(const CollectiveSample&)>;

/// A measured sample on a system: the system grown to the sample's node count (its hosts),
/// and the group of the sample's ranks spread evenly over those hosts.
[[nodiscard]] SystemSpec system_for_sample(const SystemSpec& s, const CollectiveSample& smp);
[[nodiscard]] RankGroup group_for_sample(const SystemSpec& grown, const CollectiveSample& smp);
/// NVLink domains (NCCL nodes) the sample's ranks span on `s` (a GB200 NVL72 rack of 18
/// hosts is one).
[[nodiscard]] int sample_domains(const SystemSpec& s, const CollectiveSample& smp);
/// The spec-derived terms of a sample on `s` (AlphaBetaCollectiveModel::terms), with the
/// algorithm the run forced ("" : NCCL's choice).
[[nodiscard]] AlphaBetaCollectiveModel::Terms sample_terms(const SystemSpec& s, const CollectiveSample& smp,
                                                           const std::string& forced);
/// The spec-derived time of a sample on `s` (the prior a calibration replaces).
[[nodiscard]] double spec_sample_time(const SystemSpec& s, const CollectiveSample& smp, const std::string& forced);

/// Fits a structured multi-node fit (samples of one collective, all across nodes).
/// Throws std::invalid_argument with fewer than 8 samples.
[[nodiscard]] CollectiveFit fit_structured(const std::vector<CollectiveSample>& samples, const TermsOf& terms_of);
/// The held-out check of a structured fit (as check_held_out: every third size left out).
void check_held_out_structured(FitQuality& quality, const std::vector<CollectiveSample>& samples, const TermsOf& terms_of,
                               const std::function<double(const CollectiveSample&)>& prior);

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
/// "nodes", the protocols' "ramp" and the held-out check; 1.2 the structured multi-node
/// fits ("model": "nccl-structured", "scales", "nodes_fitted"); 1.0 files read as one-node
/// fits).
[[nodiscard]] std::string calibration_to_json(const CommsCalibration& c);
[[nodiscard]] CommsCalibration parse_calibration(const JsonDocument& doc);

/// The spec-derived model with calibrated fits where they apply. NCCL's choice picks the
/// algorithm and protocol (as in the spec-derived model); its time comes from the fit of
/// runs that forced that algorithm (NCCL_ALGO=NVLS, ...), else from the fit of runs that
/// left the choice to NCCL, for the collective and node class (one node, or several), else
/// from the spec-derived model. A structured multi-node fit is evaluated at the group's
/// own node count; a fit used at a node count it did not see, or outside its sizes or
/// ranks, says so in the estimate's `basis` ("calibrated at 2 nodes, extrapolated"). An
/// all-to-allv uses the all-to-all fit at the most loaded rank's bytes (send or receive,
/// scaled by n / (n - 1) to the all-to-all convention that counts the rank's own share).
class CalibratedCollectiveModel final : public CollectiveModel {
 public:
  CalibratedCollectiveModel(const SystemSpec& system, CommsCalibration calibration);
  [[nodiscard]] CollectiveEstimate estimate(const CollectiveDesc& desc, const RankGroup& group) const override;
  /// Every algorithm NCCL could run, each timed as estimate() times NCCL's choice; empty
  /// for one rank.
  [[nodiscard]] std::vector<CollectiveEstimate> candidates(const CollectiveDesc& desc, const RankGroup& group) const;
  /// The estimate when the run forces `algorithm` (NCCL_ALGO, perfcast's name); NCCL's own
  /// choice where it cannot run here.
  [[nodiscard]] CollectiveEstimate forced_estimate(const CollectiveDesc& desc, const RankGroup& group,
                                                   const std::string& algorithm) const;
  [[nodiscard]] std::string_view name() const override { return "calibrated+nccl-alpha-beta-v4"; }

 private:
  /// NCCL's (algo, proto) for the group, timed by the fit that applies (or spec-derived).
  /// `forced`: the algorithm the run forced ("" : NCCL's choice), to pick forced fits.
  [[nodiscard]] CollectiveEstimate calibrated(const CollectiveDesc& desc, const RankGroup& group, int algo, int proto,
                                              const std::string& forced) const;
  [[nodiscard]] CollectiveEstimate choose(const CollectiveDesc& desc, const RankGroup& group, const std::string& forced) const;
  const SystemSpec* system_;
  AlphaBetaCollectiveModel fallback_;
  CommsCalibration calibration_;
};

/// The collective model for a system: calibrated where the system names a calibration
/// file, spec-derived otherwise. Throws ConfigError for a broken calibration file.
[[nodiscard]] std::unique_ptr<CollectiveModel> make_collective_model(const SystemSpec& system);

}  // namespace perfcast
