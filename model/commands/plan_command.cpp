#include "model/commands/plan_command.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "model/commands/command_context.hpp"
#include "model/report/grid_report.hpp"
#include "model/report/workload_metrics.hpp"
#include "core/json_text.hpp"

namespace perfcast {

namespace {

/// The overlaps column: "grad+tp", "grad", "tp" or "-".
std::string overlap_label(const ParallelismChoice& c) {
  if (c.overlap_grad_reduce && c.tp_comm_overlap) return "grad+tp";
  if (c.overlap_grad_reduce) return "grad";
  return c.tp_comm_overlap ? "tp" : "-";
}

constexpr double kGiB = 1024.0 * 1024 * 1024;

/// The kind of a rejection: "does not fit", "dominated" or "does not divide".
std::string rejection_kind(const std::string& why) { return why.substr(0, why.find(':')); }

/// "91 do not fit in memory" for `n` choices of one kind.
std::string rejection_count(const std::string& kind, int n) {
  if (kind == "does not fit") return fmt::format("{} do not fit in memory", n);
  if (kind == "does not divide") return fmt::format("{} do not divide the model or batch", n);
  if (kind == "dominated") return fmt::format("{} dominated (a lighter recompute fits)", n);
  return fmt::format("{} {}", n, kind);
}

/// The ep column: "8", or "8/1" with an expert TP other than the choice's tp (parallel folding).
std::string ep_label(const ParallelismChoice& c) {
  return c.expert_tp() != c.tp ? fmt::format("{}/{}", c.ep, c.expert_tp()) : std::to_string(c.ep);
}

const ScreenedChoice* find_rejected(const PlanSearchResult& r, const ParallelismChoice& c) {
  for (const auto& sc : r.rejected)
    if (sc.choice == c) return &sc;
  return nullptr;
}

std::string asked_line(const PlanSearchResult& r) {
  if (!r.asked_unresolved.empty())
    return fmt::format("the workload file's own parallelism does not resolve on {} GPUs: {}\n", r.gpus, r.asked_unresolved);
  const std::string label = r.asked.label();
  if (r.asked_rank >= 0) {
    const auto& p = r.ranked[static_cast<std::size_t>(r.asked_rank)];
    return fmt::format("the workload file's own parallelism ({}): rank {} of {}, {}{}\n", label, r.asked_rank + 1, r.ranked.size(),
                       format_time(p.iteration_time), p.why_slower.empty() ? "" : " (" + p.why_slower + ")");
  }
  if (const auto* sc = find_rejected(r, r.asked)) return fmt::format("the workload file's own parallelism ({}): {}\n", label, sc->rejected);
  if (r.asked.tp == 0) return "";
  return fmt::format("the workload file's own parallelism ({}) is outside the searched space or was not run\n", label);
}

}  // namespace

std::string render_plan_text(const PlanSearchResult& r, int top) {
  std::map<std::string, int> rejected_by_kind;
  for (const auto& sc : r.rejected) ++rejected_by_kind[rejection_kind(sc.rejected)];
  std::string out = fmt::format("perfcast plan: {} on {} ({} GPUs)\n", r.workload_name, r.system_name, r.gpus);
  out += "  space: tp (powers of 2 up to one node, or --max-tp) x cp x pp (divisors of the layers) x vp x dp x ep (MoE) x micro-batch x recompute x "
         "distributed optimizer x overlaps (DP gradient reduction when dp x cp > 1, TP communication when tp > 1); sequence "
         "parallel when tp > 1\n";
  std::string screened;
  for (const auto& [kind, n] : rejected_by_kind) screened += ", " + rejection_count(kind, n);
  const SearchCoverage coverage = search_coverage(r);
  const std::string how = coverage.estimated == 0
                              ? ""
                              : fmt::format(" ({} simulated in full, {} estimated from two short simulations)",
                                            coverage.predicted - coverage.estimated, coverage.estimated);
  out += fmt::format("  {} choices: {} predicted{}{}{}; {:.1f} s\n", r.ranked.size() + r.rejected.size() + r.not_run.size(),
                     r.ranked.size(), how, screened, r.not_run.empty() ? "" : fmt::format(", {} not run (time limit)", r.not_run.size()),
                     r.seconds);
  if (!coverage.complete()) {
    out += fmt::format("  PARTIAL SEARCH: stopped by its time limit after predicting {} of the {} candidates that passed screening ({:.0f}%); "
                       "TP sizes predicted: {} of {}. The ranking is of those predicted: a faster plan may be among the {} not run "
                       "(the workload's own choice and one candidate per TP size run first)\n",
                       coverage.predicted, coverage.candidates, 100.0 * static_cast<double>(coverage.predicted) / static_cast<double>(std::max<std::size_t>(coverage.candidates, 1)),
                       fmt::join(coverage.tp_sizes_predicted, ","), fmt::join(coverage.tp_sizes, ","), coverage.not_run);
  }
  if (r.ranked.empty()) {
    out += "no configuration fits in device memory and divides the model and the batch";
    if (!r.rejected.empty()) out += fmt::format("; e.g. {}: {}", r.rejected.front().choice.label(), r.rejected.front().rejected);
    return out + "\n";
  }
  out += fmt::format("\n{:>4} {:>3} {:>3} {:>3} {:>3} {:>4} {:>5} {:>3} {:>10} {:>8} {:>8} {:>11} {:>10} {:>6} {:>8}  {}\n", "rank", "tp",
                     "cp", "pp", "vp", "dp", "ep", "mb", "recompute", "dist-opt", "overlap", "iteration", "tokens/s", "MFU", "mem/GPU",
                     "vs the fastest");
  const std::size_t shown = std::min<std::size_t>(r.ranked.size(), static_cast<std::size_t>(std::max(top, 1)));
  for (std::size_t k = 0; k < shown; ++k) {
    const auto& p = r.ranked[k];
    const WorkloadMetrics& m = p.metrics;
    out += fmt::format("{:>4} {:>3} {:>3} {:>3} {:>3} {:>4} {:>5} {:>3} {:>10} {:>8} {:>8} {:>11} {:>10.0f} {:>5.1f}% {:>7.1f}G  {}\n", k + 1,
                       p.choice.tp, p.choice.cp, p.choice.pp, p.choice.vp, p.choice.dp, ep_label(p.choice), p.choice.micro_batch, recompute_name(p.choice.recompute),
                       p.choice.distributed_optimizer ? "on" : "off", overlap_label(p.choice),
                       (p.estimated ? "~" : "") + format_time(p.iteration_time),
                       m.tokens_per_s, m.mfu * 100, p.max_memory_bytes / kGiB,
                       k > 0 ? p.why_slower : coverage.complete() ? "fastest" : "fastest of those predicted");
  }
  if (shown < r.ranked.size()) out += fmt::format("  ... {} slower plans (--top N shows more; --csv lists all)\n", r.ranked.size() - shown);
  out += "(vs the fastest: the part of the critical rank's iteration that grew most; mem/GPU: the memory model's largest rank";
  if (coverage.estimated > 0) out += "; ~: estimated from two short simulations, --exhaustive simulates every candidate";
  out += ")\n";
  out += asked_line(r);
  for (const auto& [kind, n] : rejected_by_kind) {
    for (const auto& sc : r.rejected) {
      if (rejection_kind(sc.rejected) != kind) continue;
      out += fmt::format("{}; e.g. {}: {}\n", rejection_count(kind, n), sc.choice.label(), sc.rejected.substr(sc.rejected.find(':') + 2));
      break;
    }
  }
  return out;
}

namespace {

nlohmann::json choice_json(const ParallelismChoice& c) {
  return {{"tp", c.tp},
          {"cp", c.cp},
          {"pp", c.pp},
          {"vp", c.vp},
          {"dp", c.dp},
          {"ep", c.ep},
          {"expert_tp", c.expert_tp()},
          {"micro_batch", c.micro_batch},
          {"recompute", recompute_name(c.recompute)},
          {"distributed_optimizer", c.distributed_optimizer},
          {"sequence_parallel", c.sequence_parallel()},
          {"overlap_grad_reduce", c.overlap_grad_reduce},
          {"tp_comm_overlap", c.tp_comm_overlap}};
}

/// What a (possibly budget-cut) search predicted, so that a reader of the JSON can tell a
/// complete ranking from a partial one.
nlohmann::json coverage_json(const SearchCoverage& c) {
  return {{"complete", c.complete()},
          {"candidates", c.candidates},
          {"predicted", c.predicted},
          {"not_run", c.not_run},
          {"estimated", c.estimated},
          {"fraction_predicted", c.candidates == 0 ? 1.0 : static_cast<double>(c.predicted) / static_cast<double>(c.candidates)},
          {"tp_sizes", c.tp_sizes},
          {"tp_sizes_predicted", c.tp_sizes_predicted},
          {"ranking", c.complete() ? "of every candidate that passed screening" : "of the candidates predicted before the time limit; a faster plan may be among those not run"}};
}

}  // namespace

std::string render_plan_json(const PlanSearchResult& r, const PlanSearchRequest& req) {
  std::vector<std::string> overrides = req.base.overrides;
  overrides.insert(overrides.end(), r.resize.begin(), r.resize.end());
  nlohmann::json plans = nlohmann::json::array();
  for (std::size_t k = 0; k < r.ranked.size(); ++k) {
    const auto& p = r.ranked[k];
    const WorkloadMetrics& m = p.metrics;
    nlohmann::json j = choice_json(p.choice);
    j["rank"] = k + 1;
    j["iteration_time_s"] = p.iteration_time;
    j["tokens_per_s"] = m.tokens_per_s;
    j["mfu"] = m.mfu;
    j["max_memory_bytes"] = p.max_memory_bytes;
    j["why_slower"] = p.why_slower;
    j["how"] = p.estimated ? "estimated" : "simulated";
    nlohmann::json parts = nlohmann::json::object();
    for (const auto& part : m.breakdown) parts[part.name] = part.time;
    j["critical_rank_breakdown_s"] = parts;
    plans.push_back(std::move(j));
  }
  nlohmann::json rejected = nlohmann::json::array();
  for (const auto& sc : r.rejected) {
    nlohmann::json j = choice_json(sc.choice);
    j["reason"] = sc.rejected;
    if (sc.max_memory_bytes > 0) j["max_memory_bytes"] = sc.max_memory_bytes;
    rejected.push_back(std::move(j));
  }
  nlohmann::json not_run = nlohmann::json::array();
  for (const auto& c : r.not_run) not_run.push_back(choice_json(c));
  nlohmann::json doc = {{"context", command_context("plan", {req.base.system, req.base.workload}, overrides)},
                        {"search",
                         {{"system", r.system_name},
                          {"workload", r.workload_name},
                          {"gpus", r.gpus},
                          {"seconds", r.seconds},
                          {"timed_out", !r.not_run.empty()},
                          {"exhaustive", r.exhaustive},
                          {"short_simulations", r.short_simulations},
                          {"full_simulations", r.full_simulations},
                          {"screen_seconds", r.screen_seconds},
                          {"coverage", coverage_json(search_coverage(r))}}},
                        {"plans", plans},
                        {"rejected", rejected},
                        {"not_run", not_run}};
  if (!r.asked_unresolved.empty()) {
    doc["asked"] = {{"unresolved", r.asked_unresolved}};
  } else if (r.asked.tp > 0) {
    doc["asked"] = choice_json(r.asked);
    doc["asked"]["rank"] = r.asked_rank >= 0 ? nlohmann::json(r.asked_rank + 1) : nlohmann::json(nullptr);
  }
  return json_text(doc, 2) + "\n";
}

std::string render_plan_csv(const PlanSearchResult& r) {
  std::string out = "rank,tp,cp,pp,vp,dp,ep,micro_batch,recompute,distributed_optimizer,sequence_parallel,overlap_grad_reduce,tp_comm_overlap,"
                    "iteration_time_s,tokens_per_s,mfu,max_memory_bytes,why_slower,how,expert_tp\n";
  for (std::size_t k = 0; k < r.ranked.size(); ++k) {
    const auto& p = r.ranked[k];
    const auto& c = p.choice;
    const WorkloadMetrics& m = p.metrics;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{:.9g},{:.9g},{:.6g},{:.0f},{},{},{}\n", k + 1, c.tp, c.cp, c.pp, c.vp, c.dp,
                       c.ep, c.micro_batch,
                       recompute_name(c.recompute), c.distributed_optimizer ? "true" : "false",
                       c.sequence_parallel() ? "true" : "false", c.overlap_grad_reduce ? "true" : "false",
                       c.tp_comm_overlap ? "true" : "false", p.iteration_time, m.tokens_per_s, m.mfu,
                       p.max_memory_bytes, csv_field(p.why_slower), p.estimated ? "estimated" : "simulated", c.expert_tp());
  }
  return out;
}

}  // namespace perfcast
