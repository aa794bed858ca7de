// Published H100 training step times against perfcast's predictions, with the shipped
// defaults and nothing fitted: data/public-measurements/h100_training_step_times.csv (NeMo
// 24.07's FP8 performance table, Megatron-Core r0.8.0's weak-scaling table, the Megatron MoE
// model zoo's Qwen3-235B table; sources in that folder's README). Each row becomes a workload:
// a shipped preset for the models perfcast has one (GPT-3 175B, Llama 3 8B / 70B, Nemotron-4
// 340B, Qwen3-235B-A22B), else the architecture the source
// states (Llama 2, the Megatron-Core GPTs), with the row's batch, sequence, parallelism and
// precision, the overlaps of the source's software (distributed optimizer with overlapped
// gradient reduction and parameter gather, TP communication overlap, fp32 or bf16 gradients, FP8
// parameters under FP8), the megatron_core runtime (its attention kernel on Hopper: cuDNN's
// fused attention, as Transformer Engine picks it), on DGX H100 nodes (cluster_4x_dgx_h100.json
// resized to the row's GPUs). What the source does not state (the Megatron-Core rows'
// micro-batch and virtual stages) is an assumption printed with the row.
//
// Usage: perfcast_h100_recipes_check [--data CSV] [--source ID] [--csv FILE]
// Prints per row: predicted and measured step time, signed error, MFU, whether the memory
// model says the run fits, and the geomean |error| per source and precision.
// Exit 2 when the data file is missing.
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/csv_record.hpp"
#include "core/error_stats.hpp"
#include "model/graph/memory_estimate.hpp"
#include "model/predict/predict.hpp"
#include "model/report/workload_metrics.hpp"

using namespace perfcast;

namespace {

using Row = std::map<std::string, std::string>;

std::vector<Row> read_rows(const std::string& path) {
  std::ifstream in(path);
  std::vector<Row> rows;
  std::string line;
  if (!std::getline(in, line)) return rows;
  const auto header = split_csv_record(line);
  while (std::getline(in, line)) {
    if (trim_blanks(line).empty()) continue;
    const auto f = split_csv_record(line);
    Row r;
    for (std::size_t i = 0; i < header.size() && i < f.size(); ++i) r[header[i]] = f[i];
    rows.push_back(std::move(r));
  }
  return rows;
}

int as_int(const Row& r, const std::string& key, int fallback) {
  const auto it = r.find(key);
  return it == r.end() || it->second.empty() ? fallback : std::stoi(it->second);
}

/// The architecture of a row's model: a shipped preset's document, or the source's GPT.
nlohmann::json architecture(const std::string& src, const Row& r) {
  const std::string m = r.at("model");
  static const std::map<std::string, std::string> presets{{"gpt3_175b", "gpt3_175b"},
                                                          {"llama3_8b", "llama3.1_8b"},
                                                          {"llama3_70b", "llama3.1_70b"},
                                                          {"nemotron4_340b", "nemotron4_340b"},
                                                          {"qwen3_235b_a22b", "qwen3_235b_a22b"}};
  if (const auto it = presets.find(m); it != presets.end()) {
    std::ifstream in(src + "/configs/workloads/" + it->second + ".json");
    nlohmann::json j = nlohmann::json::parse(in);
    j.erase("sources");
    j.erase("runtime");
    return j;
  }
  nlohmann::json j{{"schema", "perfcast.workload"}, {"schema_version", "1.0"}, {"name", m}, {"model", "transformer"},
                   {"architecture", "decoder"}, {"optimizer", "adam"}, {"attention", "flash"}};
  if (m.rfind("llama2_", 0) == 0) {
    // Meta's Llama 2 config.json files: SwiGLU, RoPE, vocabulary 32,000, untied embeddings;
    // 70B with 8 kv heads.
    const bool b7 = m == "llama2_7b", b13 = m == "llama2_13b";
    j.update({{"hidden", b7 ? 4096 : b13 ? 5120 : 8192}, {"heads", b7 ? 32 : b13 ? 40 : 64}, {"kv_heads", b7 ? 32 : b13 ? 40 : 8},
              {"layers", b7 ? 32 : b13 ? 40 : 80}, {"ffn_hidden", b7 ? 11008 : b13 ? 13824 : 28672}, {"vocab", 32000},
              {"activation", "swiglu"}, {"position_embedding", "rope"}, {"tied_embeddings", false}, {"dropout", 0.0}});
    return j;
  }
  // Megatron-Core's weak-scaling GPTs: "gpt_<size>_h<hidden>_l<layers>_a<heads>", vocabulary
  // 131,072, GeLU MLP of 4h, learned positions (Megatron's GPT defaults), dropout 0.1.
  int h = 0, l = 0, a = 0;
  if (std::sscanf(m.substr(m.find("_h") + 2).c_str(), "%d_l%d_a%d", &h, &l, &a) != 3)
    throw ConfigError("h100_training_step_times.csv", r.at("row_id"), "unknown model " + m);
  j.update({{"hidden", h}, {"heads", a}, {"layers", l}, {"vocab", 131072}, {"activation", "gelu"},
            {"position_embedding", "learned"}, {"tied_embeddings", false}, {"dropout", 0.1}});
  return j;
}

struct Outcome {
  double predicted = 0, measured = 0, mfu = 0;
  bool fits = true;
  std::string assumed;
};

Outcome predict_row(const std::string& src, const Row& r) {
  nlohmann::json w = architecture(src, r);
  const int gpus = as_int(r, "gpus", 8), tp = as_int(r, "tp", 1), pp = as_int(r, "pp", 1), cp = as_int(r, "cp", 1);
  int vp = as_int(r, "vp", 0);
  int mb = as_int(r, "micro_batch", 0);
  Outcome o;
  if (mb == 0) {
    mb = 1;
    o.assumed += "micro-batch 1 assumed; ";
  }
  if (vp == 0) {
    vp = 1;
    o.assumed += "vp 1 assumed; ";
  }
  const bool fp8 = r.at("precision") == "fp8";
  w["seq_len"] = std::stoi(r.at("seq_len"));
  w["micro_batch"] = mb;
  w["global_batch"] = std::stoi(r.at("global_batch"));
  w["precision"] = fp8 ? "fp8" : "bf16";
  w["fp8_param_gather"] = fp8;
  // Gradients: Megatron-LM's training script under --bf16 accumulates and all-reduces them
  // in fp32 (megatron/training/arguments.py @ f2e5db40, lines 299-308: "bfloat16 requires
  // gradient accumulation and all-reduce to be done in fp32", with no flag to turn it off at
  // that commit; later versions keep fp32 unless --grad-reduce-in-bf16, which the model zoo's
  // Qwen3 configuration @ c1ad0b5c does not set). NeMo's rows keep bf16 gradients, assumed:
  // its 24.07 table does not state them.
  const bool megatron_lm_script =
      r.at("source_id") == "megatron_core_r0.8.0_weak_scaling" || r.at("source_id") == "megatron_moe_modelzoo";
  w["grad_reduce_dtype"] = megatron_lm_script ? "fp32" : "bf16";
  w["recompute"] = "none";
  // The preset's pipeline split (the embedding and the loss counted) and expert parallelism
  // stay; the row states tp, pp, cp, vp and, for MoE rows, ep.
  nlohmann::json par = w.contains("parallelism") ? w["parallelism"] : nlohmann::json::object();
  par.update({{"tp", tp}, {"pp", pp}, {"cp", cp}, {"vp", vp}, {"dp", "auto"}});
  if (const int ep = as_int(r, "ep", 1); ep > 1) par["ep"] = ep;
  w["parallelism"] = par;
  w["sequence_parallel"] = tp > 1;
  // The Megatron MoE model zoo's runs do not enable TP communication overlap
  // (model_configs/benchmarking/*.yaml); NeMo's recipes and Megatron-Core's table do.
  const bool zoo = r.at("source_id") == "megatron_moe_modelzoo";
  w["tp_comm_overlap"] = tp > 1 && !zoo;
  // The model zoo's table recomputes "norm, act": Megatron-Core's --recompute-granularity
  // selective --recompute-modules layernorm moe_act.
  if (zoo) {
    w["recompute"] = "selective";
    w["recompute_modules"] = nlohmann::json::array({"layernorm", "moe_act"});
  }
  w["distributed_optimizer"] = true;
  w["overlap_grad_reduce"] = true;
  w["overlap_param_gather"] = true;
  w.erase("schedule");
  w["runtime"] = "megatron_core";
  JsonDocument sys = load_json_file(src + "/configs/systems/cluster_4x_dgx_h100.json");
  JsonDocument wl{w, src + "/configs/workloads/h100_recipe_row.json"};
  const std::vector<std::string> set{fmt::format("system.nodes={}", gpus / 8)};
  const auto p = predict_documents(std::move(sys), std::move(wl), std::nullopt, set, 3);
  o.predicted = p->timeline.iteration_time;
  o.measured = std::stod(r.at("step_time_s"));
  o.mfu = workload_metrics(*p).mfu;
  o.fits = memory_verdict(p->memory).empty();
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Published H100 training step times against perfcast's predictions"};
  const std::string src = PERFCAST_SOURCE_DIR;
  std::string data = src + "/data/public-measurements/h100_training_step_times.csv", only, csv_out;
  app.add_option("--data", data, "the CSV of published step times");
  app.add_option("--source", only, "only the rows of this source_id");
  app.add_option("--csv", csv_out, "write one row per prediction");
  CLI11_PARSE(app, argc, argv);
  const auto rows = read_rows(data);
  if (rows.empty()) {
    std::fprintf(stderr, "error: %s: no rows (missing file?)\n", data.c_str());
    return 2;
  }
  std::map<std::string, std::vector<double>> errors;  // source / precision -> relative errors
  std::string csv = "row_id,source_id,model,gpus,precision,tp,pp,cp,vp,predicted_s,measured_s,error,predicted_mfu,fits,assumed\n";
  std::printf("%-12s %-30s %6s %5s %3s %3s %3s %3s %10s %10s %8s %6s %5s\n", "row", "model", "GPUs", "prec", "tp", "pp", "cp", "vp",
              "predicted", "measured", "error", "MFU", "fits");
  for (const Row& r : rows) {
    if (!only.empty() && r.at("source_id") != only) continue;
    const Outcome o = predict_row(src, r);
    const double err = o.predicted / o.measured - 1;
    errors[r.at("source_id") + " " + r.at("precision")].push_back(err);
    errors["all"].push_back(err);
    std::printf("%-12s %-30s %6s %5s %3s %3s %3s %3s %9.3fs %9.3fs %+7.1f%% %5.1f%% %5s %s\n", r.at("row_id").c_str(),
                r.at("model").c_str(), r.at("gpus").c_str(), r.at("precision").c_str(), r.at("tp").c_str(), r.at("pp").c_str(),
                r.at("cp").c_str(), r.at("vp").empty() ? "-" : r.at("vp").c_str(), o.predicted, o.measured, 100 * err,
                100 * o.mfu, o.fits ? "yes" : "NO", o.assumed.c_str());
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.4f},{},{}\n", r.at("row_id"), r.at("source_id"),
                       r.at("model"), r.at("gpus"), r.at("precision"), r.at("tp"), r.at("pp"), r.at("cp"), r.at("vp"), o.predicted,
                       o.measured, err, o.mfu, o.fits ? "yes" : "no", o.assumed);
  }
  std::printf("\n%-45s %5s %10s %10s %8s %8s\n", "rows", "n", "geomean", "mean", "bias", "max");
  for (const auto& [group, e] : errors) {
    const ErrorSummary s = summarize_errors(e);
    std::printf("%-45s %5zu %9.1f%% %9.1f%% %+7.1f%% %7.1f%%\n", group.c_str(), e.size(), 100 * s.geomean_abs, 100 * s.mape,
                100 * s.mean_signed, 100 * s.max_abs);
  }
  if (!csv_out.empty()) std::ofstream(csv_out) << csv;
  return 0;
}
