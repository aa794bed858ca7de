// Megatron-LM CI step times on one DGX H100 and one DGX A100 against perfcast's predictions,
// with the shipped defaults and nothing fitted at run time: configs/systems/dgx_h100.json or
// dgx_a100.json and the runtime profile of the row's mode: megatron_core_ci (deterministic
// mode) or megatron_core_ci_nondeterministic, each fitted on its DGX A100 rows, so only the
// DGX H100 rows are held out; --runtime NAME uses one profile for every row.
//
// Data: data/public-measurements/megatron_ci_step_times.csv, the rows measured on
// DGX H100 or DGX A100 that perfcast can express: dense GPT (default) or mixture-of-experts
// (--models moe) models without Megatron FSDP, multi-latent attention, multi-token
// prediction or the Muon optimizer. Each row's configuration (layers, widths, heads and query groups, sequence,
// vocabulary, batch, TP / CP / PP / VP / DP / EP, precision, recompute, sequence parallelism,
// the flags swiglu, rope, untied embeddings, unfused attention, distributed optimizer,
// overlapped gradient reduction and parameter gather, TP communication overlap, and the MoE
// arguments) becomes a workload; the measured value is the median logged iteration time.
// These are small CI models, often in deterministic mode: host- and launch-bound runs.
//
// Usage: perfcast_megatron_ci_check [--data CSV] [--gpus h100|a100|gb200|both]
//                                   [--models gpt|moe|all] [--deterministic yes|no|all]
//                                   [--runtime auto|NAME] [--fit none|tp1|a100|moe_a100]
//                                   [--memory 1 [--memory-data CSV]]
//                                   [--max-error E] [--host-speed 1] [--json FILE]
// --fit tp1: grid-search the runtime's host op overhead and backward op overhead on the
// tp 1 rows (training set) and report the tp > 1 rows (held out) with them; --fit a100: fit
// on the DGX A100 rows and hold out the DGX H100 rows (a different GPU and CPU: the runtime's
// host costs are scaled to each system's CPU, docs/collectives-and-runtimes.md); --fit
// moe_a100 (with --models moe): the same for the host cost per MoE layer forward. A fit
// needs a named --runtime; --deterministic picks the rows of one mode.
// --host-speed 1: print the DGX A100 / DGX H100 step-time ratio of the paired test cases
// this tool does not predict (the host speed of dgx_h100.json's CPU) and exit; with --data
// megatron_ci_gb200.csv, the DGX A100 / DGX GB200 ratio (gb200_nvl72.json's Grace).
// --memory 1: instead of step times, the memory model on each row's last rank against what
// Megatron-LM logged there (data/public-measurements/megatron_ci_memory.csv, extracted from the
// same golden-values files by scripts/extract_megatron_ci_memory.py): weights, gradient
// buffer and optimizer states against the allocation after the step, and those plus the
// activations against the peak allocation.
// --max-error E: exit 1 when the DGX H100 rows' geomean |error| exceeds E (a fraction; the
// DGX GB200 rows' in a file without DGX H100 rows; with --memory, that of every row's peak).
// --data data/public-measurements/megatron_ci_gb200.csv: the same test cases on DGX GB200
// (scripts/extract_megatron_ci_gb200.py), predicted on gb200_nvl72.json shaped to the run's
// trays (two trays of 4 GPUs in one NVLink domain); everything they are predicted with was fitted
// elsewhere (the host costs on DGX A100) except the Grace host speed, measured with
// --host-speed 1 on its MoE rows.
// --json FILE: the error summaries per group (bench/accuracy_json.hpp).
// Exit 2 when the data file is missing.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/accuracy_json.hpp"
#include "bench/host_grid.hpp"
#include "core/csv_record.hpp"
#include "core/error_stats.hpp"
#include "model/predict/predict.hpp"

using namespace perfcast;

namespace {

using Row = std::map<std::string, std::string>;

std::vector<Row> read_rows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const auto header = split_csv_record(line);
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    const auto f = split_csv_record(line);
    if (f.size() < header.size()) continue;
    Row r;
    for (std::size_t i = 0; i < header.size(); ++i) r[header[i]] = f[i];
    rows.push_back(std::move(r));
  }
  return rows;
}

/// "key=value" pairs of the row's other_config column.
std::map<std::string, std::string> flags_of(const std::string& other) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= other.size()) {
    const auto end = other.find(';', start);
    std::string kv = other.substr(start, end == std::string::npos ? std::string::npos : end - start);
    while (!kv.empty() && kv.front() == ' ') kv.erase(kv.begin());
    if (const auto eq = kv.find('='); eq != std::string::npos) out[kv.substr(0, eq)] = kv.substr(eq + 1);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

bool trivial(const std::string& v) { return v.empty() || v == "1"; }

bool moe_row(const Row& r) { return r.at("model").rfind("MOE", 0) == 0; }

/// Why perfcast cannot express the row, or "".
std::string unsupported(const Row& r, const std::map<std::string, std::string>& flags) {
  if (r.at("gpu").find("DGX H100") == std::string::npos && r.at("gpu").find("DGX A100") == std::string::npos &&
      r.at("gpu").find("DGX GB200") == std::string::npos)
    return "not DGX H100 / DGX A100 / DGX GB200";
  if (r.at("model").rfind("GPT", 0) != 0 && !moe_row(r)) return "not GPT";
  if (flags.count("use-megatron-fsdp") || !r.at("fsdp").empty()) return "Megatron FSDP";
  // perfcast models MLA, but the table records only the flag, not the ranks and head widths.
  if (flags.count("multi-latent-attention")) return "multi-latent attention (its ranks are not in the table)";
  if (flags.count("mtp-num-layers")) return "multi-token prediction";
  // The Muon optimizer (Newton-Schulz iterations on every weight matrix): the test case name
  // says it (..._muon, ..._dist_muon); the CSV's flags do not. perfcast models Adam.
  if (r.at("model").find("muon") != std::string::npos) return "Muon optimizer (named by the test case)";
  if (moe_row(r) && !flags.count("num-experts")) return "MoE row without num-experts";
  return "";
}

/// The rows whose DGX A100 / DGX H100 step-time ratio measures the host speed of DGX H100's
/// CPU (print_host_speed): the test cases that are neither dense GPT (fitted and held out)
/// nor anything else the check predicts were they GPT. A fixed set: the MoE rows the check
/// now predicts stay in it, so the measured 1.43 does not move with what the check covers.
bool host_speed_sample(const Row& r, const std::map<std::string, std::string>& flags) {
  const bool dense_gpt = r.at("model").rfind("GPT", 0) == 0 && trivial(r.at("ep")) && unsupported(r, flags).empty();
  return !dense_gpt;
}

/// Whether the row runs Megatron's own unfused attention (scores, softmax and dropout as
/// separate kernels, the probabilities kept for the backward): --attention-backend unfused or
/// local, or --transformer-impl local, whose layer spec's core attention is Megatron's
/// DotProductAttention (megatron/core/models/backends.py LocalSpecProvider.core_attention @
/// d98e8a64, the commit of the rows), not Transformer Engine's.
bool unfused_attention(const std::map<std::string, std::string>& flags) {
  const auto backend = flags.find("attention-backend");
  const auto impl = flags.find("transformer-impl");
  return (backend != flags.end() && (backend->second == "unfused" || backend->second == "local")) ||
         (impl != flags.end() && impl->second == "local");
}

/// The row as a perfcast workload.
nlohmann::json workload_of(const Row& r, const std::map<std::string, std::string>& flags) {
  auto num = [&](const std::string& key) {
    std::smatch m;
    const std::string& v = r.at(key);
    return std::regex_search(v, m, std::regex(R"((\d+))")) ? std::stoll(m[1]) : 0LL;
  };
  auto on = [&](const std::string& key) {
    const auto it = flags.find(key);
    return it != flags.end() && it->second == "True";
  };
  const std::string vocab = r.at("vocab");
  std::smatch vm;
  const long long v = std::regex_search(vocab, vm, std::regex(R"((\d+) before padding)")) ? std::stoll(vm[1]) : num("vocab");
  const std::string precision = r.at("precision").find("fp8") != std::string::npos ? "fp8" : r.at("precision");
  const std::string rc = r.at("recompute");
  nlohmann::json w = {
      {"schema", "perfcast.workload"}, {"schema_version", "1.0"}, {"name", r.at("model")}, {"model", "transformer"},
      {"architecture", "decoder"}, {"hidden", num("hidden")}, {"heads", num("heads")}, {"layers", num("layers")},
      {"seq_len", num("seq_len")}, {"vocab", v}, {"precision", precision}, {"micro_batch", num("micro_batch")},
      {"global_batch", num("global_batch")},
      {"recompute", rc.find("full") != std::string::npos ? "full" : rc.find("selective") != std::string::npos ? "selective" : "none"},
      {"optimizer", "adam"}, {"distributed_optimizer", on("use-distributed-optimizer")},
      {"overlap_grad_reduce", on("overlap-grad-reduce")}, {"overlap_param_gather", on("overlap-param-gather")},
      {"tp_comm_overlap", on("tp-comm-overlap")},
      {"parallelism", {{"tp", num("tp")}, {"pp", num("pp")}, {"vp", std::max(1LL, num("vp"))}, {"cp", std::max(1LL, num("cp"))}, {"dp", "auto"}}},
      {"sequence_parallel", r.at("sequence_parallel") == "True"},
      {"activation", on("swiglu") ? "swiglu" : "gelu"},
      {"position_embedding", flags.count("position-embedding-type") && flags.at("position-embedding-type") == "rope" ? "rope" : "learned"},
      {"tied_embeddings", !on("untie-embeddings-and-output-weights")},
      {"attention", unfused_attention(flags) ? "unfused" : "flash"},
      {"runtime", "megatron_core"}};
  // --attention-backend flash: Megatron turns Transformer Engine's fused (cuDNN) attention off
  // (NVTE_FUSED_ATTN=0), so flash-attn runs; auto (the default) leaves TE's own choice, the
  // runtime profile's rule.
  if (flags.count("attention-backend") && flags.at("attention-backend") == "flash") w["attention_kernel"] = "flash2";
  if (moe_row(r)) {
    // Megatron's MoE arguments; --moe-token-dispatcher-type defaults to allgather and
    // --moe-grouped-gemm to off (megatron/training/arguments.py).
    nlohmann::json moe = {{"experts", std::stoll(flags.at("num-experts"))},
                          {"top_k", flags.count("moe-router-topk") ? std::stoll(flags.at("moe-router-topk")) : 2LL},
                          {"grouped_gemm", on("moe-grouped-gemm")},
                          {"dispatcher", flags.count("moe-token-dispatcher-type") ? flags.at("moe-token-dispatcher-type") : "allgather"}};
    if (flags.count("expert-tensor-parallel-size")) moe["expert_tp"] = std::stoll(flags.at("expert-tensor-parallel-size"));
    if (flags.count("moe-ffn-hidden-size")) moe["ffn_hidden"] = std::stoll(flags.at("moe-ffn-hidden-size"));
    w["moe"] = moe;
    w["parallelism"]["ep"] = std::max(1LL, num("ep"));
  }
  if (num("ffn_hidden") > 0) w["ffn_hidden"] = num("ffn_hidden");
  if (num("kv_heads") > 0) w["kv_heads"] = num("kv_heads");
  return w;
}

/// Which system file a row was measured on.
std::string system_of(const Row& r) {
  if (r.at("gpu").find("GB200") != std::string::npos) return "gb200_nvl72";
  return r.at("gpu").find("H100") != std::string::npos ? "dgx_h100" : "dgx_a100";
}

/// The system's short name in tables and group labels: "h100", "a100", "gb200".
std::string system_label(const std::string& system) {
  if (system.rfind("dgx_", 0) == 0) return system.substr(4);
  return system.substr(0, system.find('_'));
}

/// --set edits that shape the row's system: a DGX GB200 run's trays (4 GPUs each, the row's
/// GPUs / 4) in one NVLink domain of its GPUs (the CI's GB200 recipes run 2 trays of one
/// NVL72 rack; gb200_nvl72.json describes the whole rack).
std::vector<std::string> system_shape(const Row& r, const std::string& system) {
  if (system != "gb200_nvl72") return {};
  const int gpus = std::stoi(r.at("gpus"));
  return {fmt::format("system.nodes={}", std::max(1, gpus / 4)), fmt::format("system.intra_node.domain_gpus={}", gpus)};
}

struct Case {
  Row row;
  nlohmann::json workload;
  std::string system;  ///< stem of configs/systems/<system>.json
  bool deterministic = false;
  /// --set edits of the system the row's environment implies: NCCL_ALGO without NVLS
  /// (Ring, ^NVLS: deterministic-mode recipes) switches off in-switch reduction.
  std::vector<std::string> system_overrides;
};

/// The row's NCCL_ALGO forbids NVLS: "Ring", "^NVLS", any list without NVLS. The value is
/// a comma list of whole algorithm names ("NVLSTree" is not "NVLS"), "^" excluding them.
bool nvls_excluded(const std::map<std::string, std::string>& flags) {
  const auto it = flags.find("NCCL_ALGO");
  if (it == flags.end()) return false;
  std::string v = it->second;
  for (char& ch : v) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const bool except = !v.empty() && v.front() == '^';
  bool named = false;
  std::stringstream list(except ? v.substr(1) : v);
  for (std::string name; std::getline(list, name, ',');)
    if (trim_blanks(name) == "NVLS") named = true;
  return except ? named : !named;
}

/// Rows measured on the GPUs asked for that perfcast can express; counts the others by reason.
std::vector<Case> cases_of(const std::vector<Row>& rows, const std::string& gpus, const std::string& models,
                           const std::string& runtime, std::map<std::string, int>& skipped) {
  std::vector<Case> cases;
  for (const Row& r : rows) {
    const auto flags = flags_of(r.at("other_config"));
    std::string why = unsupported(r, flags);
    const std::string sys = system_of(r);
    if (why.empty() && gpus != "both" && system_label(sys) != gpus) why = "not " + gpus;
    if (why.empty() && models != "all" && moe_row(r) != (models == "moe")) why = models == "moe" ? "not MoE (--models)" : "MoE (--models)";
    if (!why.empty()) {
      skipped[why]++;
      continue;
    }
    nlohmann::json w = workload_of(r, flags);
    const bool deterministic = flags.count("deterministic-mode") && flags.at("deterministic-mode") == "True";
    // auto: the profile of the row's mode (Megatron's --deterministic-mode costs host time).
    w["runtime"] = runtime != "auto" ? runtime : deterministic ? "megatron_core_ci" : "megatron_core_ci_nondeterministic";
    std::vector<std::string> system_overrides = system_shape(r, sys);
    if (nvls_excluded(flags)) system_overrides.push_back("system.intra_node.nvls=false");
    cases.push_back({r, std::move(w), sys, deterministic, std::move(system_overrides)});
  }
  return cases;
}

/// The prediction of a case (its system edits, then `overrides`), or nullptr when it cannot be
/// predicted (the reason counted in `failed`).
std::unique_ptr<Prediction> predict_row(const Case& c, const std::vector<std::string>& overrides, int iterations,
                                        std::map<std::string, int>* failed) {
  const std::string src = PERFCAST_SOURCE_DIR;
  JsonDocument sys = load_json_file(src + "/configs/systems/" + c.system + ".json");
  JsonDocument wl{c.workload, src + "/configs/workloads/megatron_ci_row.json"};  // beside the shipped runtimes
  std::vector<std::string> all = c.system_overrides;
  all.insert(all.end(), overrides.begin(), overrides.end());
  try {
    return predict_documents(std::move(sys), std::move(wl), std::nullopt, all, iterations);
  } catch (const std::exception& e) {
    if (failed) (*failed)[std::string("predict failed: ") + e.what()]++;
    return nullptr;
  }
}

/// Predicted iteration time of a case, s; < 0 when it cannot be predicted (the reason counted).
double predict_case(const Case& c, const std::vector<std::string>& overrides, std::map<std::string, int>* failed) {
  const auto p = predict_row(c, overrides, 3, failed);
  return p ? p->timeline.iteration_time : -1.0;
}

/// --memory: the memory Megatron-LM logged on the row's last rank (world_size - 1, the rank
/// that writes TensorBoard), bytes: allocated when the step was logged (after the optimizer
/// step) and the peak allocated (torch.cuda.memory_stats()).
struct MeasuredMemory {
  double allocated = 0;
  double peak = 0;
};

/// data/public-measurements/megatron_ci_memory.csv by source URL (the step-time rows' key).
std::map<std::string, MeasuredMemory> read_memory(const std::string& path) {
  std::map<std::string, MeasuredMemory> out;
  for (const Row& r : read_rows(path))
    out[r.at("source")] = {std::stod(r.at("mem_allocated_bytes")), std::stod(r.at("mem_max_allocated_bytes"))};
  return out;
}

/// The predicted memory of the case's last rank; nullopt when it cannot be predicted (the
/// reason counted).
std::optional<RankMemory> predict_last_rank_memory(const Case& c, std::map<std::string, int>* failed) {
  const auto p = predict_row(c, {}, 2, failed);
  if (!p || p->memory.empty()) return std::nullopt;
  return p->memory.back();
}

/// --memory 1: perfcast's memory model on the last rank against what Megatron-LM logged there:
/// the persistent state (weights, gradient buffer, optimizer states: RankMemory::dense)
/// against the allocation after the step, and that plus the activations at the peak
/// (RankMemory::dense + activations; the framework reserve left out: the caching allocator's
/// counters do not see it) against the peak allocation.
int run_memory_check(const std::vector<Case>& cases, const std::string& memory_data, const std::string& json_out,
                     double max_error, std::map<std::string, int>& skipped) {
  if (!std::ifstream(memory_data)) {
    std::fprintf(stderr, "no data file %s\n", memory_data.c_str());
    return 2;
  }
  auto measured = read_memory(memory_data);
  std::map<std::string, std::vector<double>> errors_by;
  nlohmann::json row_values = nlohmann::json::array();
  std::printf("%-34s %-5s %3s %3s %3s %-9s %9s %9s %8s %9s %9s %8s\n", "model (test case)", "sys", "tp", "pp", "dp",
              "recompute", "alloc GiB", "pred GiB", "error", "peak GiB", "pred GiB", "error");
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  for (const Case& c : cases) {
    auto it = measured.find(c.row.at("source"));
    if (it == measured.end() && c.row.count("mem_allocated_bytes") && !c.row.at("mem_allocated_bytes").empty())
      it = measured.emplace(c.row.at("source"), MeasuredMemory{std::stod(c.row.at("mem_allocated_bytes")),
                                                               std::stod(c.row.at("mem_max_allocated_bytes"))}).first;
    if (it == measured.end()) {
      skipped["no memory in the golden values"]++;
      continue;
    }
    const auto m = predict_last_rank_memory(c, &skipped);
    if (!m) continue;
    const double persistent = m->dense + m->embedding, peak = persistent + m->activations + m->io;
    const double err_alloc = persistent / it->second.allocated - 1, err_peak = peak / it->second.peak - 1;
    for (const std::string& g : {std::string("all"), c.system}) {
      errors_by["allocated " + g].push_back(err_alloc);
      errors_by["peak " + g].push_back(err_peak);
    }
    row_values.push_back({{"model", c.row.at("model")}, {"system", c.system}, {"tp", c.row.at("tp")}, {"pp", c.row.at("pp")},
                          {"measured_allocated_bytes", it->second.allocated}, {"predicted_allocated_bytes", persistent},
                          {"measured_peak_bytes", it->second.peak}, {"predicted_peak_bytes", peak}});
    std::string name = c.row.at("model");
    if (name.size() > 34) name = name.substr(0, 34);
    std::printf("%-34s %-5s %3s %3s %3s %-9s %9.2f %9.2f %+7.1f%% %9.2f %9.2f %+7.1f%%\n", name.c_str(), system_label(c.system).c_str(),
                c.row.at("tp").c_str(), c.row.at("pp").c_str(), c.row.at("dp").c_str(),
                std::string(c.workload["recompute"]).c_str(), it->second.allocated / kGiB, persistent / kGiB, 100 * err_alloc,
                it->second.peak / kGiB, peak / kGiB, 100 * err_peak);
  }
  std::printf("\n");
  for (const auto& [group, errs] : errors_by) {
    const ErrorSummary s = summarize_errors(errs);
    std::printf("%-19s %3zu rows: geomean |error| %6.2f%%, mean |error| %6.2f%%, bias %+7.2f%%, max |error| %6.2f%%\n",
                group.c_str(), s.count, 100 * s.geomean_abs, 100 * s.mape, 100 * s.mean_signed, 100 * s.max_abs);
  }
  for (const auto& [why, n] : skipped) std::printf("skipped %d rows: %s\n", n, why.c_str());
  bench::write_accuracy_json(json_out, "megatron_ci_memory", errors_by, {{"rows", row_values}});
  if (max_error >= 0 && errors_by.count("peak all") && geomean_abs_error(errors_by["peak all"]) > max_error) {
    std::printf("peak memory geomean |error| above %.2f%%\n", 100 * max_error);
    return 1;
  }
  return 0;
}

/// "test_case (dev)" / "test_case (lts)": a test case in one container, the key that pairs
/// a DGX H100 row with a DGX A100 row.
std::string pairing_key(const Row& r) {
  const std::string& fw = r.at("framework");
  const auto at = fw.find("test_case ");
  const std::string tc = at == std::string::npos ? r.at("model") : fw.substr(at + 10);
  return tc + (fw.find("(lts container)") != std::string::npos ? " (lts)" : " (dev)");
}

/// Host speed of a system's CPU relative to DGX A100's (DGX H100's, or DGX GB200's with its
/// rows in --data), as the median ratio of DGX A100 to that system's step times of the test
/// cases measured on both (same container) that this tool does not predict (BERT, T5, GPT
/// with expert parallelism): small, host-bound steps, kept apart from the rows the check
/// reports. `a100_rows`: where the DGX A100 rows are (the step-time CSV).
void print_host_speed(const std::vector<Row>& rows, const std::vector<Row>& a100_rows) {
  std::map<std::string, double> other, a100;
  std::string name;
  auto add = [&](const Row& r) {
    if (!host_speed_sample(r, flags_of(r.at("other_config")))) return;
    const std::string& gpu = r.at("gpu");
    if (gpu.find("DGX A100") != std::string::npos) {
      a100[pairing_key(r)] = std::stod(r.at("step_time_s"));
    } else if (gpu.find("DGX H100") != std::string::npos || gpu.find("DGX GB200") != std::string::npos) {
      const std::string sys = gpu.find("GB200") != std::string::npos ? "DGX GB200" : "DGX H100";
      if (name.empty()) name = sys;
      if (sys == name) other[pairing_key(r)] = std::stod(r.at("step_time_s"));
    }
  };
  for (const Row& r : rows) add(r);
  for (const Row& r : a100_rows) add(r);
  std::vector<double> ratios;
  for (const auto& [key, t] : other)
    if (const auto it = a100.find(key); it != a100.end() && t > 0) ratios.push_back(it->second / t);
  if (ratios.empty()) {
    std::printf("no test case measured on both systems\n");
    return;
  }
  std::sort(ratios.begin(), ratios.end());
  const std::size_t n = ratios.size();
  const double median = n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  std::printf("DGX A100 / %s step time over %zu test cases measured on both (not predicted here): median %.3f, "
              "quartiles %.3f / %.3f\n", name.c_str(), n, median, ratios[n / 4], ratios[(3 * n) / 4]);
}

/// What no model seeing only perfcast's inputs can explain: rows of one system with the same
/// prediction (the same configuration as perfcast reads it) measured at different times.
/// Prints the geomean |measured / group median - 1| over the rows of groups of two or more.
void print_scatter(const std::map<std::pair<std::string, long long>, std::vector<double>>& groups) {
  std::vector<double> dev;
  int n_groups = 0;
  for (const auto& [key, measured] : groups) {
    if (measured.size() < 2) continue;
    ++n_groups;
    std::vector<double> m = measured;
    std::sort(m.begin(), m.end());
    const std::size_t n = m.size();
    const double median = n % 2 ? m[n / 2] : (m[n / 2 - 1] + m[n / 2]) / 2;
    for (double x : m) dev.push_back(x / median - 1);
  }
  if (dev.empty()) return;
  const ErrorSummary s = summarize_errors(dev, 1e-3);
  std::printf("scatter: %zu rows in %d groups that perfcast cannot tell apart (same system, same prediction): "
              "mean |measured / group median - 1| %.2f%%, max %.2f%%\n",
              s.count, n_groups, 100 * s.mape, 100 * s.max_abs);
}

/// Mean |error| of the cases `train` selects, predicted with the --set `overrides`.
template <typename Train>
double training_error(const std::vector<Case>& cases, Train train, const std::vector<std::string>& overrides) {
  std::vector<double> e;
  for (const Case& c : cases) {
    if (!train(c)) continue;
    const double t = predict_case(c, overrides, nullptr);
    if (t > 0) e.push_back(t / std::stod(c.row.at("step_time_s")) - 1);
  }
  return summarize_errors(e).mape;
}

/// Grid search of the runtime's forward and backward host op overheads minimising the mean
/// |error| over the cases `train` selects (not the geomean: groups of rows perfcast cannot
/// tell apart would let one exact hit outweigh the rest); returns the --set overrides.
template <typename Train>
std::vector<std::string> fit_host(const std::vector<Case>& cases, Train train, double& best_error) {
  // Forward 50-1000 us in 25 us steps; backward 0-200 us (autograd ops pay far less than
  // Python module calls: the vTrain fit found 10 us against 140 us).
  const bench::HostFit best = bench::best_host_on_grid(bench::grid_steps(50, 1000, 25), {0, 5, 10, 25, 50, 100, 200},
                                                       [&](double fwd, double bwd) {
                                                         return training_error(cases, train, bench::host_op_overrides(fwd, bwd));
                                                       });
  best_error = best.error;
  return best.error < 1e30 ? bench::host_op_overrides(best.forward_us, best.backward_us) : std::vector<std::string>{};
}

/// Grid search of the runtime's extra host time per MoE layer forward (0-5 ms in 50 us
/// steps), the other host costs as shipped, minimising the mean |error| over the cases
/// `train` selects; returns the --set override.
template <typename Train>
std::vector<std::string> fit_moe_host(const std::vector<Case>& cases, Train train, double& best_error) {
  std::vector<std::string> best_overrides;
  best_error = 1e30;
  for (double moe = 0; moe <= 5000; moe += 50) {
    const std::vector<std::string> o = {fmt::format("runtime.host.moe_layer_overhead={}us", moe)};
    const double g = training_error(cases, train, o);
    if (g < best_error) best_error = g, best_overrides = o;
  }
  return best_overrides;
}

}  // namespace

/// The features of a row's workload that the per-feature table splits on (--by-feature).
std::vector<std::string> features_of(const nlohmann::json& w) {
  const auto& par = w.at("parallelism");
  std::vector<std::string> f;
  auto add = [&](bool on, const char* name) {
    if (on) f.emplace_back(name);
  };
  add(par.at("tp").get<long long>() > 1, "tensor parallel (tp > 1)");
  add(w.at("sequence_parallel").get<bool>(), "sequence parallel");
  add(w.at("tp_comm_overlap").get<bool>(), "TP communication overlap");
  add(par.at("pp").get<long long>() > 1, "pipeline parallel (pp > 1)");
  add(par.at("vp").get<long long>() > 1, "interleaved 1F1B (vp > 1)");
  add(par.at("cp").get<long long>() > 1, "context parallel (cp > 1)");
  add(w.contains("moe"), "mixture of experts");
  add(par.contains("ep") && par.at("ep").get<long long>() > 1, "expert parallel (ep > 1)");
  add(w.at("distributed_optimizer").get<bool>(), "distributed optimizer");
  add(w.at("overlap_grad_reduce").get<bool>(), "overlapped gradient reduction");
  add(w.at("overlap_param_gather").get<bool>(), "overlapped parameter gather");
  add(w.at("recompute") == "selective", "selective recompute");
  add(w.at("recompute") == "full", "full recompute");
  add(w.at("precision") == "fp8", "FP8");
  add(w.at("activation") == "swiglu", "SwiGLU");
  add(w.contains("kv_heads") && w.at("kv_heads").get<long long>() < w.at("heads").get<long long>(), "grouped-query attention");
  add(w.at("position_embedding") == "rope", "rotary embeddings");
  add(w.at("attention") == "unfused", "unfused attention");
  return f;
}

/// Per system, for every feature some row has: the rows with it and the rows without.
void print_by_feature(const std::vector<std::tuple<std::string, double, std::vector<std::string>>>& scored) {
  std::map<std::string, std::set<std::string>> features;  // system -> features seen
  for (const auto& [system, err, fs] : scored) features[system].insert(fs.begin(), fs.end());
  for (const auto& [system, names] : features) {
    std::printf("\nper feature, %s (geomean |error|, mean |error|, bias of the rows with it; geomean of the rows without)\n",
                system.c_str());
    std::printf("  %-32s %5s %9s %9s %8s   %5s %9s\n", "feature", "rows", "geomean", "mean", "bias", "w/o", "geomean");
    for (const auto& name : names) {
      std::vector<double> with, without;
      for (const auto& [sys, err, fs] : scored) {
        if (sys != system) continue;
        (std::find(fs.begin(), fs.end(), name) != fs.end() ? with : without).push_back(err);
      }
      const ErrorSummary a = summarize_errors(with);
      std::printf("  %-32s %5zu %8.2f%% %8.2f%% %+7.2f%%   %5zu %8.2f%%\n", name.c_str(), a.count, 100 * a.geomean_abs, 100 * a.mape,
                  100 * a.mean_signed, without.size(), without.empty() ? 0.0 : 100 * geomean_abs_error(without));
    }
  }
}

int main(int argc, char** argv) {
  CLI::App app{"Megatron-LM CI step times on DGX H100 / DGX A100 against perfcast's predictions (shipped defaults)"};
  const std::string src = PERFCAST_SOURCE_DIR;
  std::string data = src + "/data/public-measurements/megatron_ci_step_times.csv";
  std::string gpus = "both", fit = "none", runtime = "auto", models = "gpt", deterministic = "all";
  int host_speed = 0, by_feature = 0, memory = 0;
  std::string memory_data = src + "/data/public-measurements/megatron_ci_memory.csv";
  std::string json_out;
  double max_error = -1;
  app.add_option("--data", data, "megatron_ci_step_times.csv");
  app.add_option("--json", json_out, "write the error summaries per group as JSON to FILE (- for standard output)");
  app.add_option("--gpus", gpus, "rows measured on h100, a100, gb200 (with --data megatron_ci_gb200.csv) or all of the file's (both)")
      ->check(CLI::IsMember({"h100", "a100", "gb200", "both"}));
  app.add_option("--models", models, "gpt: dense GPT rows; moe: mixture-of-experts rows; all")
      ->check(CLI::IsMember({"gpt", "moe", "all"}));
  app.add_option("--deterministic", deterministic, "rows run in deterministic mode (yes), not (no), or all")
      ->check(CLI::IsMember({"yes", "no", "all"}));
  app.add_option("--runtime", runtime,
                 "runtime profile of the predictions (configs/runtimes/NAME.json); auto (default): megatron_core_ci for "
                 "rows in deterministic mode, megatron_core_ci_nondeterministic for the others");
  app.add_option("--fit", fit, "none; tp1: fit host costs on tp 1 rows; a100: fit on DGX A100 rows, hold out DGX H100; "
                                "moe_a100: fit the MoE layer host cost on DGX A100 MoE rows, hold out DGX H100")
      ->check(CLI::IsMember({"none", "tp1", "a100", "moe_a100"}));
  app.add_option("--max-error", max_error,
                 "exit 1 when the DGX H100 (or, in a file without them, DGX GB200) rows' geomean |error| is above this "
                 "fraction; with --memory, that of every row's peak");
  app.add_option("--host-speed", host_speed, "1: print the DGX H100 / DGX A100 host speed ratio from paired test cases and exit");
  app.add_option("--by-feature", by_feature, "1: also print the errors per feature (rows with it, rows without), per system");
  app.add_option("--memory", memory,
                 "1: compare the last rank's predicted memory with what Megatron-LM logged there (--memory-data) instead of step times");
  app.add_option("--memory-data", memory_data, "megatron_ci_memory.csv (scripts/extract_megatron_ci_memory.py)");
  CLI11_PARSE(app, argc, argv);
  if (!std::ifstream(data)) {
    std::fprintf(stderr, "no data file %s\n", data.c_str());
    return 2;
  }
  if ((fit == "a100" || fit == "moe_a100") && gpus != "both") {
    std::fprintf(stderr, "--fit %s needs --gpus both\n", fit.c_str());
    return 2;
  }
  if (fit != "none" && runtime == "auto") {
    std::fprintf(stderr, "--fit fits one profile: name it with --runtime and pick its rows with --deterministic\n");
    return 2;
  }
  if (fit == "moe_a100" && models != "moe") {
    std::fprintf(stderr, "--fit moe_a100 needs --models moe\n");
    return 2;
  }
  const std::vector<Row> rows = read_rows(data);
  if (host_speed) {
    const std::string main_data = src + "/data/public-measurements/megatron_ci_step_times.csv";
    print_host_speed(rows, data == main_data ? std::vector<Row>{} : read_rows(main_data));
    return 0;
  }
  std::map<std::string, int> skipped;
  std::vector<Case> cases = cases_of(rows, gpus, models, runtime, skipped);
  if (deterministic != "all") {
    std::erase_if(cases, [&](const Case& c) {
      const bool drop = c.deterministic != (deterministic == "yes");
      if (drop) skipped[deterministic == "yes" ? "not deterministic (--deterministic)" : "deterministic (--deterministic)"]++;
      return drop;
    });
  }
  if (memory) return run_memory_check(cases, memory_data, json_out, max_error, skipped);
  auto in_train = [&](const Case& c) {
    return fit == "tp1" ? c.row.at("tp") == "1" : fit == "a100" || fit == "moe_a100" ? c.system == "dgx_a100" : false;
  };
  std::vector<std::string> host_overrides;
  if (fit == "moe_a100") {
    double fit_error = 0;
    host_overrides = fit_moe_host(cases, in_train, fit_error);
    std::printf("fitted on the DGX A100 MoE rows: %s -> mean |error| %.2f%%; the other rows below are held out\n\n",
                host_overrides[0].c_str(), 100 * fit_error);
  } else if (fit != "none") {
    double fit_error = 0;
    host_overrides = fit_host(cases, in_train, fit_error);
    std::printf("fitted on the %s rows: %s, %s -> mean |error| %.2f%%; the other rows below are held out\n\n",
                fit == "tp1" ? "tp 1" : "DGX A100", host_overrides[0].c_str(), host_overrides[1].c_str(), 100 * fit_error);
  }
  std::map<std::string, std::vector<double>> errors_by;
  nlohmann::json row_values = nlohmann::json::array();  // --json: every predicted row
  std::vector<std::tuple<std::string, double, std::vector<std::string>>> scored;  // system, error, features
  std::map<std::pair<std::string, long long>, std::vector<double>> same_prediction;  // (system, predicted ns) -> measured  // "all", per system, deterministic or not, held out
  std::printf("%-34s %-8s %3s %3s %3s %3s %6s %-9s %-5s %10s %10s %8s\n", "model (test case)", "system", "tp", "pp", "dp",
              "mb", "prec", "recompute", "det", "meas s", "pred s", "error");
  for (const Case& c : cases) {
    const Row& r = c.row;
    const nlohmann::json& w = c.workload;
    const double predicted = predict_case(c, host_overrides, &skipped);
    if (predicted < 0) continue;
    const double measured = std::stod(r.at("step_time_s"));
    const double err = predicted / measured - 1;
    errors_by["all"].push_back(err);
    row_values.push_back({{"model", r.at("model")}, {"system", c.system}, {"tp", r.at("tp")}, {"pp", r.at("pp")},
                          {"deterministic", c.deterministic}, {"measured_s", measured}, {"predicted_s", predicted},
                          {"error", err}});
    same_prediction[{c.system, std::llround(predicted * 1e9)}].push_back(measured);
    errors_by[c.system].push_back(err);
    scored.emplace_back(c.system, err, features_of(w));
    errors_by[c.deterministic ? "deterministic mode" : "not deterministic"].push_back(err);
    if (fit != "none" && !in_train(c)) errors_by["held out"].push_back(err);
    std::string name = r.at("model");
    if (name.size() > 34) name = name.substr(0, 34);
    std::printf("%-34s %-8s %3s %3s %3s %3s %6s %-9s %-5s %10.4f %10.4f %+7.1f%%\n", name.c_str(), system_label(c.system).c_str(),
                r.at("tp").c_str(), r.at("pp").c_str(), r.at("dp").c_str(), r.at("micro_batch").c_str(),
                std::string(w["precision"]).c_str(), std::string(w["recompute"]).c_str(), c.deterministic ? "yes" : "no",
                measured, predicted, 100 * err);
  }
  std::printf("\n");
  for (const auto& [group, errs] : errors_by) {
    const ErrorSummary s = summarize_errors(errs);
    std::printf("%-19s %3zu rows: geomean |error| %6.2f%%, mean |error| %6.2f%%, bias %+7.2f%%, max |error| %6.2f%%\n",
                group.c_str(), s.count, 100 * s.geomean_abs, 100 * s.mape, 100 * s.mean_signed, 100 * s.max_abs);
  }
  print_scatter(same_prediction);
  if (by_feature) print_by_feature(scored);
  for (const auto& [why, n] : skipped) std::printf("skipped %d rows: %s\n", n, why.c_str());
  nlohmann::json skipped_json = nlohmann::json::object();
  for (const auto& [why, n] : skipped) skipped_json[why] = n;
  bench::write_accuracy_json(json_out, "megatron_ci_" + models, errors_by, {{"skipped", skipped_json}, {"fit", fit}, {"rows", row_values}});
  // The held-out system: DGX H100 in the step-time CSV, DGX GB200 in its own file.
  const std::string held = errors_by.count("dgx_h100") ? "dgx_h100" : "gb200_nvl72";
  if (max_error >= 0 && errors_by.count(held) && geomean_abs_error(errors_by[held]) > max_error) {
    std::printf("%s geomean |error| above %.2f%%\n", held.c_str(), 100 * max_error);
    return 1;
  }
  return 0;
}
