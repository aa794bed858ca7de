// Megatron-LM CI step times on one DGX H100 against perfcast's predictions, with the
// shipped defaults and nothing fitted: configs/systems/dgx_h100.json and the
// megatron_core runtime profile.
//
// Data: ../shared/data/public-measurements/megatron_ci_step_times.csv, the GPT rows measured
// on DGX H100 that perfcast can express: no expert, context or virtual-pipeline parallelism,
// no Megatron FSDP, no multi-latent attention. Each row's configuration (layers, widths,
// heads and query groups, sequence, vocabulary, batch, TP / PP / DP, precision,
// recompute, sequence parallelism, and the flags swiglu, rope, untied embeddings, unfused
// attention, distributed optimizer, overlapped gradient reduction, TP communication
// overlap) becomes a workload; the measured value is the median logged iteration time.
// These are small CI models, often in deterministic mode: host- and launch-bound runs.
//
// Usage: perfcast_megatron_ci_check [--data CSV] [--skip-missing 1] [--fit-host 1]
// --fit-host 1: grid-search the runtime's host op overhead and backward op overhead on the
// tp 1 rows (training set) and report the tp > 1 rows (held out) with them.
// Exit 77 when the data file is missing and --skip-missing is given.
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

/// Why perfcast cannot express the row, or "".
std::string unsupported(const Row& r, const std::map<std::string, std::string>& flags) {
  if (r.at("gpu").find("H100") == std::string::npos) return "not H100";
  if (r.at("model").rfind("GPT", 0) != 0) return "not GPT";
  if (!trivial(r.at("ep")) || !trivial(r.at("cp")) || !trivial(r.at("vp"))) return "expert / context / virtual pipeline";
  if (flags.count("use-megatron-fsdp") || !r.at("fsdp").empty()) return "Megatron FSDP";
  if (flags.count("multi-latent-attention")) return "multi-latent attention";
  return "";
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
      {"overlap_grad_reduce", on("overlap-grad-reduce")}, {"tp_comm_overlap", on("tp-comm-overlap")},
      {"parallelism", {{"tp", num("tp")}, {"pp", num("pp")}, {"dp", "auto"}}},
      {"sequence_parallel", r.at("sequence_parallel") == "True"},
      {"activation", on("swiglu") ? "swiglu" : "gelu"},
      {"position_embedding", flags.count("position-embedding-type") && flags.at("position-embedding-type") == "rope" ? "rope" : "learned"},
      {"tied_embeddings", !on("untie-embeddings-and-output-weights")},
      {"attention", flags.count("attention-backend") && flags.at("attention-backend") == "unfused" ? "unfused" : "flash"},
      {"runtime", "megatron_core"}};
  if (num("ffn_hidden") > 0) w["ffn_hidden"] = num("ffn_hidden");
  if (num("kv_heads") > 0) w["kv_heads"] = num("kv_heads");
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Megatron-LM CI step times on DGX H100 against perfcast's predictions (shipped defaults)"};
  const std::string src = PERFCAST_SOURCE_DIR;
  std::string data = src + "/../shared/data/public-measurements/megatron_ci_step_times.csv";
  int skip_missing = 0, fit_host_flag = 0;
  app.add_option("--data", data, "megatron_ci_step_times.csv");
  app.add_option("--fit-host", fit_host_flag, "1: fit the runtime's host op overheads on the tp 1 rows");
  app.add_option("--skip-missing", skip_missing, "exit 77 (skipped) when the data file is missing");
  CLI11_PARSE(app, argc, argv);
  if (!std::ifstream(data)) {
    std::fprintf(stderr, "no data file %s\n", data.c_str());
    return skip_missing ? 77 : 2;
  }
  std::vector<std::string> host_overrides;
  std::map<std::string, int> skipped;
  struct Case {
    Row row;
    nlohmann::json workload;
    bool deterministic = false;
  };
  std::vector<Case> cases;
  for (const Row& r : read_rows(data)) {
    const auto flags = flags_of(r.at("other_config"));
    if (const std::string why = unsupported(r, flags); !why.empty()) {
      skipped[why]++;
      continue;
    }
    cases.push_back({r, workload_of(r, flags), flags.count("deterministic-mode") && flags.at("deterministic-mode") == "True"});
  }
  // Predicted iteration time of a case, s; < 0 when it cannot be predicted (the reason counted).
  auto predict_case = [&](const Case& c, const std::vector<std::string>& overrides, std::map<std::string, int>* failed) {
    JsonDocument sys = load_json_file(src + "/configs/systems/dgx_h100.json");
    JsonDocument wl{c.workload, src + "/configs/workloads/megatron_ci_row.json"};  // beside the shipped runtimes
    try {
      return predict_documents(std::move(sys), std::move(wl), std::nullopt, overrides, 3)->timeline.iteration_time;
    } catch (const std::exception& e) {
      if (failed) (*failed)[std::string("predict failed: ") + e.what()]++;
      return -1.0;
    }
  };
  if (fit_host_flag) {
    double best = 1e30;
    for (double fwd : {50, 100, 150, 200, 250, 300, 350, 400, 500, 600, 800}) {
      for (double bwd : {0, 25, 50, 100, 150, 200, 250, 300, 400, 500}) {
        const std::vector<std::string> o = {fmt::format("runtime.host.op_overhead={}us", fwd),
                                            fmt::format("runtime.host.backward_op_overhead={}us", bwd)};
        std::vector<double> e;
        for (const Case& c : cases) {
          if (c.row.at("tp") != "1") continue;
          const double t = predict_case(c, o, nullptr);
          if (t > 0) e.push_back(t / std::stod(c.row.at("step_time_s")) - 1);
        }
        const double g = geomean_abs_error(e);
        if (g < best) best = g, host_overrides = o;
      }
    }
    std::printf("fitted on the tp 1 rows: %s, %s -> geomean |error| %.2f%%; the tp > 1 rows below are held out\n\n",
                host_overrides[0].c_str(), host_overrides[1].c_str(), 100 * best);
  }
  std::vector<double> errors, errors_deterministic, errors_tuned, held_out;
  std::printf("%-34s %3s %3s %3s %3s %6s %-9s %-5s %10s %10s %8s\n", "model (test case)", "tp", "pp", "dp", "mb", "prec",
              "recompute", "det", "meas s", "pred s", "error");
  for (const Case& c : cases) {
    const Row& r = c.row;
    const nlohmann::json& w = c.workload;
    const double predicted = predict_case(c, host_overrides, &skipped);
    if (predicted < 0) continue;
    const double measured = std::stod(r.at("step_time_s"));
    const double err = predicted / measured - 1;
    errors.push_back(err);
    (c.deterministic ? errors_deterministic : errors_tuned).push_back(err);
    if (r.at("tp") != "1") held_out.push_back(err);
    std::string name = r.at("model");
    if (name.size() > 34) name = name.substr(0, 34);
    std::printf("%-34s %3s %3s %3s %3s %6s %-9s %-5s %10.4f %10.4f %+7.1f%%\n", name.c_str(), r.at("tp").c_str(),
                r.at("pp").c_str(), r.at("dp").c_str(), r.at("micro_batch").c_str(), std::string(w["precision"]).c_str(),
                std::string(w["recompute"]).c_str(), c.deterministic ? "yes" : "no", measured, predicted, 100 * err);
  }
  const ErrorSummary all = summarize_errors(errors);
  if (!host_overrides.empty())
    std::printf("\nheld out (tp > 1, %zu rows): geomean |error| %.2f%%", held_out.size(), 100 * geomean_abs_error(held_out));
  std::printf("\n%zu rows: geomean |error| %.2f%%, bias %+.2f%%, max |error| %.2f%%\n", all.count, 100 * all.geomean_abs,
              100 * all.mean_signed, 100 * all.max_abs);
  if (!errors_deterministic.empty())
    std::printf("  deterministic mode (%zu rows): geomean %.2f%%\n", errors_deterministic.size(),
                100 * geomean_abs_error(errors_deterministic));
  if (!errors_tuned.empty())
    std::printf("  not deterministic (%zu rows): geomean %.2f%%\n", errors_tuned.size(), 100 * geomean_abs_error(errors_tuned));
  for (const auto& [why, n] : skipped) std::printf("skipped %d rows: %s\n", n, why.c_str());
  return 0;
}
