#include "model/plan_search/parallelism_space.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/graph/transformer_builder.hpp"

namespace perfcast {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "none";
}

std::vector<std::string> ParallelismChoice::overrides() const {
  std::vector<std::string> out{fmt::format("workload.parallelism.tp={}", tp),
          fmt::format("workload.parallelism.cp={}", cp),
          fmt::format("workload.parallelism.pp={}", pp),
          fmt::format("workload.parallelism.vp={}", vp),
          fmt::format("workload.parallelism.ep={}", ep),
          fmt::format("workload.parallelism.dp={}", dp),
          fmt::format("workload.micro_batch={}", micro_batch),
          fmt::format("workload.recompute=\"{}\"", recompute_name(recompute)),
          fmt::format("workload.distributed_optimizer={}", distributed_optimizer ? "true" : "false"),
          fmt::format("workload.sequence_parallel={}", sequence_parallel() ? "true" : "false"),
          fmt::format("workload.overlap_grad_reduce={}", overlap_grad_reduce ? "true" : "false"),
          fmt::format("workload.tp_comm_overlap={}", tp_comm_overlap ? "true" : "false")};
  if (etp > 0) out.push_back(fmt::format("workload.moe.expert_tp={}", etp));
  if (even_split_of_uneven) {
    out.emplace_back("workload.parallelism.first_stage_layers=0");
    out.emplace_back("workload.parallelism.last_stage_layers=0");
    out.emplace_back("workload.parallelism.account_for_embedding=false");
    out.emplace_back("workload.parallelism.account_for_loss=false");
  }
  // The workload's overlap_param_gather stays where its conditions hold (it is not searched).
  if (!(distributed_optimizer && overlap_grad_reduce)) out.emplace_back("workload.overlap_param_gather=false");
  return out;
}

std::string ParallelismChoice::label() const {
  const std::string cps = cp > 1 ? fmt::format(" cp {}", cp) : "", vps = vp > 1 ? fmt::format(" vp {}", vp) : "";
  const std::string eps = (ep > 1 ? fmt::format(" ep {}", ep) : "") + (etp > 0 && etp != tp ? fmt::format(" etp {}", etp) : "");
  return fmt::format("tp {}{} pp {}{} dp {}{}, micro-batch {}, recompute {}{}{}{}{}", tp, cps, pp, vps, dp, eps, micro_batch,
                     recompute_name(recompute),
                     distributed_optimizer ? ", distributed optimizer" : "", overlap_grad_reduce ? ", overlap grad reduce" : "",
                     tp_comm_overlap ? ", TP comm overlap" : "",
                     even_split_of_uneven ? ", layers split evenly (not the file's own split)" : "");
}

namespace {

std::vector<int> powers_of_two_up_to(int n) {
  std::vector<int> out;
  for (int v = 1; v <= n; v *= 2) out.push_back(v);
  return out;
}

std::vector<int> divisors(std::int64_t n) {
  std::vector<int> out;
  for (std::int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(static_cast<int>(d));
  return out;
}

/// The workload with `c` applied, checked by resolve_parallelism; the ConfigError's
/// message when the shape does not divide.
std::string apply_choice(TransformerSpec& w, const ParallelismChoice& c, int world) {
  w.tp = c.tp;
  w.cp = c.cp;
  w.pp = c.pp;
  w.vp = c.vp;
  w.ep = c.ep;
  w.moe.expert_tp = c.etp;
  w.dp = c.dp;
  w.micro_batch = c.micro_batch;
  w.recompute = c.recompute;
  w.distributed_optimizer = c.distributed_optimizer;
  w.sequence_parallel = c.sequence_parallel();
  w.overlap_grad_reduce = c.overlap_grad_reduce;
  w.tp_comm_overlap = c.tp_comm_overlap;
  w.first_stage_layers = w.last_stage_layers = 0;  // the space splits layers evenly
  w.account_for_embedding = w.account_for_loss = false;
  // The workload's overlap_param_gather holds where its conditions do (not searched).
  w.overlap_param_gather = w.overlap_param_gather && c.distributed_optimizer && c.overlap_grad_reduce;
  try {
    resolve_parallelism(w, world);
  } catch (const ConfigError& e) {
    return e.message();
  }
  return "";
}

/// Screens the recompute settings of one shape: rejects those that do not fit and keeps
/// only the lightest that does.
void screen_recompute_settings(const TransformerSpec& base, const SystemSpec& s, ParallelismChoice shape,
                               const std::vector<Recompute>& recomputes, std::vector<ScreenedChoice>& out) {
  bool kept = false;
  std::string lighter;
  for (const Recompute rc : recomputes) {
    shape.recompute = rc;
    ScreenedChoice sc{shape, 0, s.gpu.memory, ""};
    TransformerSpec w = base;
    sc.rejected = apply_choice(w, shape, s.world_size());
    if (!sc.rejected.empty()) {
      sc.rejected = "does not divide: " + sc.rejected;
    } else if (kept) {
      sc.rejected = fmt::format("dominated: recompute {} fits and recomputes less", lighter);
    } else {
      const auto memory = estimate_transformer_memory(w, s);
      for (const auto& m : memory) sc.max_memory_bytes = std::max(sc.max_memory_bytes, double(m.total()));
      const std::string verdict = memory_verdict(memory);
      if (!verdict.empty()) {
        sc.rejected = "does not fit: " + verdict;
      } else {
        kept = true;
        lighter = recompute_name(rc);
      }
    }
    out.push_back(std::move(sc));
  }
}

/// The choices of one tp x cp x pp x vp shape: dp from the GPUs left, then micro-batch,
/// distributed optimizer, overlaps and recompute.
void screen_shape(const TransformerSpec& w, const SystemSpec& s, const SpaceOptions& o, int tp, int cp, int pp, int vp,
                  int ep, int etp, std::vector<ScreenedChoice>& out) {
  const int world = s.world_size();
  if (world % (tp * cp * pp) != 0) return;
  const int dp = world / (tp * cp * pp);
  const int grad_ranks = dp * cp;  // gradients are reduced over dp x cp
  for (const std::int64_t mb : o.micro_batches) {
    if (w.global_batch % (mb * dp) != 0) continue;  // not a shape of this batch: not listed
    for (const bool dist : o.distributed_optimizer) {
      if (dist && grad_ranks == 1) continue;  // nothing to shard
      for (const bool grad_overlap : o.overlap_grad_reduce) {
        if (grad_overlap && grad_ranks == 1) continue;  // no gradient reduction
        for (const bool tp_overlap : o.tp_comm_overlap) {
          if (tp_overlap && tp == 1) continue;  // no TP communication
          ParallelismChoice c;
          c.tp = tp;
          c.cp = cp;
          c.pp = pp;
          c.vp = vp;
          c.ep = ep;
          c.etp = etp;
          c.dp = dp;
          c.micro_batch = mb;
          c.distributed_optimizer = dist;
          c.overlap_grad_reduce = grad_overlap;
          c.tp_comm_overlap = tp_overlap;
          c.even_split_of_uneven = w.custom_pipeline_split();
          screen_recompute_settings(w, s, c, o.recomputes, out);
        }
      }
    }
  }
}

}  // namespace

namespace {

/// Each value of `values` in [lo, hi] and at most kMaxSpaceValues of them, else ConfigError on `option`.
template <typename T>
void check_values(const char* option, const std::vector<T>& values, std::int64_t lo, std::int64_t hi) {
  if (values.size() > kMaxSpaceValues)
    throw ConfigError(option, "", fmt::format("at most {} values, got {}", kMaxSpaceValues, values.size()));
  for (const T v : values)
    if (static_cast<std::int64_t>(v) < lo || static_cast<std::int64_t>(v) > hi)
      throw ConfigError(option, "", fmt::format("expected values in [{}, {}], got {}", lo, hi, v));
}

}  // namespace

void validate_space_options(const SpaceOptions& o) {
  check_values("micro_batches", o.micro_batches, 1, 1 << 20);
  check_values("cp", o.context_parallel, 1, 1024);
  check_values("vp", o.virtual_stages, 1, 64);
  check_values("ep", o.expert_parallel, 1, 4096);
  check_values("expert_tp", o.expert_tensor_parallel, 1, 4096);
  if (o.max_tp < 0 || o.max_tp > (1 << 20))
    throw ConfigError("max_tp", "", fmt::format("expected 0 (the GPUs of one node) or [1, {}], got {}", 1 << 20, o.max_tp));
  if (o.recomputes.size() > kMaxSpaceValues) throw ConfigError("recomputes", "", "too many values");
}

std::vector<ScreenedChoice> screen_parallelism_space(const TransformerSpec& w, const SystemSpec& s, const SpaceOptions& o) {
  validate_space_options(o);
  const int world = s.world_size();
  const int max_tp = o.max_tp > 0 ? o.max_tp : s.gpus_per_node;
  std::vector<ScreenedChoice> out;
  const std::vector<int> cps = o.context_parallel.empty() ? std::vector<int>{w.cp} : o.context_parallel;
  const std::vector<int> vps = o.virtual_stages.empty() ? std::vector<int>{w.vp} : o.virtual_stages;
  const std::vector<int> eps = o.expert_parallel.empty() || !w.moe.enabled() ? std::vector<int>{w.ep} : o.expert_parallel;
  const std::vector<int> etps =
      o.expert_tensor_parallel.empty() || !w.moe.enabled() ? std::vector<int>{w.moe.expert_tp} : o.expert_tensor_parallel;
  for (const int tp : powers_of_two_up_to(std::min(max_tp, world)))
    for (const int cp : cps)
      for (const int pp : divisors(w.layers))
        for (const int vp : vps) {
          if (vp > 1 && pp == 1) continue;  // no pipeline to interleave: not listed
          for (const int ep : eps)
            for (const int etp : etps) screen_shape(w, s, o, tp, cp, pp, vp, ep, etp, out);
        }
  return out;
}

}  // namespace perfcast
