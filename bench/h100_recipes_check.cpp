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
// Usage: perfcast_h100_recipes_check [--data CSV] [--source ID] [--csv FILE] [--host FWD,BWD]
//                                     [--fit-host SOURCE|all] [--leave-one-source-out]
//                                     [--write-workloads DIR]
// Prints per row: predicted and measured step time, signed error, MFU, whether the memory
// model says the run fits, the measured-minus-predicted gap per layer and micro-batch a GPU
// runs, and the geomean |error| per source and precision; then the least-squares line of that
// gap against the predicted time per layer and micro-batch (a gap that does not grow with the
// layer's work is a cost per layer and micro-batch; one proportional to it, a rate).
// `--host FWD,BWD`: the megatron_core runtime's host op overheads (us on DGX H100's CPU), as
// `--set runtime.host.op_overhead=FWDus runtime.host.backward_op_overhead=BWDus
// runtime.host.fp8_module_overhead=FWDus` would set them (an FP8 module call pays FWD twice:
// host_overrides). `--fit-host SOURCE`: grid-search those two on the rows of SOURCE (mean
// |error|), then print every row with the fit: the other sources' rows are held out
// (`--fit-host all`: every row). `--leave-one-source-out`: for each source, fit on the other sources' rows and predict
// its rows; prints each source's held-out error and the fitted values. `--write-workloads DIR`:
// write each row's workload document and print the `perfcast predict` command for it, to look
// into one row (`--top`, `--trace`).
// Exit 2 when the data file is missing.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <future>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/host_grid.hpp"
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
  /// Layers a GPU runs per micro-batch (layers / pp) times the micro-batches per pipeline:
  /// the count the measured-minus-predicted gap is divided by.
  double layer_micro_batches = 0;
  bool fits = true;
  std::string assumed;
};

/// The workload document of a row (what the module comment says), with the assumptions it
/// had to make appended to `assumed`.
nlohmann::json row_workload(const std::string& src, const Row& r, std::string& assumed) {
  nlohmann::json w = architecture(src, r);
  const int tp = as_int(r, "tp", 1), pp = as_int(r, "pp", 1), cp = as_int(r, "cp", 1);
  int vp = as_int(r, "vp", 0);
  int mb = as_int(r, "micro_batch", 0);
  if (mb == 0) {
    mb = 1;
    assumed += "micro-batch 1 assumed; ";
  }
  if (vp == 0) {
    vp = 1;
    assumed += "vp 1 assumed; ";
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
  return w;
}

Outcome predict_row(const std::string& src, const Row& r, const std::vector<std::string>& host) {
  Outcome o;
  const nlohmann::json w = row_workload(src, r, o.assumed);
  const nlohmann::json& par = w.at("parallelism");
  const int gpus = as_int(r, "gpus", 8), tp = par.at("tp"), pp = par.at("pp"), cp = par.at("cp");
  const int mb = w.at("micro_batch").get<int>();
  JsonDocument sys = load_json_file(src + "/configs/systems/cluster_4x_dgx_h100.json");
  JsonDocument wl{w, src + "/configs/workloads/h100_recipe_row.json"};
  std::vector<std::string> set{fmt::format("system.nodes={}", gpus / 8)};
  set.insert(set.end(), host.begin(), host.end());
  const auto p = predict_documents(std::move(sys), std::move(wl), std::nullopt, set, 3);
  o.predicted = p->timeline.iteration_time;
  const int dp = std::max(1, gpus / (tp * pp * cp));
  o.layer_micro_batches = w.at("layers").get<double>() / pp * (std::stod(r.at("global_batch")) / (dp * mb));
  o.measured = std::stod(r.at("step_time_s"));
  o.mfu = workload_metrics(*p).mfu;
  o.fits = memory_verdict(p->memory).empty();
  return o;
}

/// The megatron_core runtime's host costs at forward / backward op overheads of `forward_us` /
/// `backward_us`, with an FP8 module call paying `forward_us` once more (host.fp8_module_overhead):
/// Transformer Engine's FP8 linear modules take the host more than twice as long to issue as
/// the same modules in bf16 (TransformerEngine issue #761, H100, TE @ cf6fc89 of April 2024,
/// three months before NeMo 24.07), so the fit keeps that ratio and fits one cost a module call.
std::vector<std::string> host_overrides(double forward_us, double backward_us) {
  return bench::host_op_overrides(forward_us, backward_us, forward_us);
}

/// Every row's outcome with the host overrides `host`, two rows at a time (each prediction
/// is independent).
std::vector<Outcome> predict_rows(const std::string& src, const std::vector<Row>& rows, const std::vector<std::string>& host) {
  std::vector<Outcome> out(rows.size());
  for (std::size_t i = 0; i < rows.size(); i += 2) {
    auto second = i + 1 < rows.size() ? std::async(std::launch::async, [&, i] { return predict_row(src, rows[i + 1], host); })
                                      : std::future<Outcome>{};
    out[i] = predict_row(src, rows[i], host);
    if (second.valid()) out[i + 1] = second.get();
  }
  return out;
}

/// Grid search of the megatron_core runtime's forward and backward host op overheads (us on
/// the rows' CPU, DGX H100's Xeon) minimising the mean |error| over `rows`: forward 0-300 us in
/// 20 us steps and backward 0, 10, 25 or 50 us (autograd ops pay far less than Python module
/// calls: the vTrain fit found 10 us against 140 us), then forward within 20 us of the best in
/// 5 us steps and backward within 5 us of it.
bench::HostFit fit_host(const std::string& src, const std::vector<Row>& rows) {
  auto mean_error = [&](double fwd, double bwd) {
    std::vector<double> e;
    for (const Outcome& o : predict_rows(src, rows, host_overrides(fwd, bwd))) e.push_back(o.predicted / o.measured - 1);
    return summarize_errors(e).mape;
  };
  const bench::HostFit coarse = bench::best_host_on_grid(bench::grid_steps(0, 300, 20), {0, 10, 25, 50}, mean_error);
  std::vector<double> backward;
  for (double b : {coarse.backward_us - 5, coarse.backward_us, coarse.backward_us + 5})
    if (b >= 0) backward.push_back(b);
  return bench::best_host_on_grid(bench::grid_steps(std::max(0.0, coarse.forward_us - 20), coarse.forward_us + 20, 5), backward,
                                  mean_error, coarse);
}

/// Writes each row's workload to `dir`/<row_id>.json and prints the `perfcast predict` command
/// that predicts it (the system file resized to the row's GPUs); exit 2 when `dir` cannot be
/// written.
int write_workloads(const std::string& src, const std::vector<Row>& rows, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const Row& r : rows) {
    std::string assumed;
    const nlohmann::json w = row_workload(src, r, assumed);
    const std::string path = dir + "/" + r.at("row_id") + ".json";
    std::ofstream out(path);
    if (!(out << w.dump(2) << "\n")) {
      std::fprintf(stderr, "error: %s: cannot write the workload\n", path.c_str());
      return 2;
    }
    std::printf("perfcast predict --system %s/configs/systems/cluster_4x_dgx_h100.json --workload %s --set system.nodes=%d%s%s\n",
                src.c_str(), path.c_str(), as_int(r, "gpus", 8) / 8, assumed.empty() ? "" : "   # ", assumed.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Published H100 training step times against perfcast's predictions"};
  const std::string src = PERFCAST_SOURCE_DIR;
  std::string data = src + "/data/public-measurements/h100_training_step_times.csv", only, csv_out, host_arg, fit_source,
              workloads_dir;
  bool loso = false;
  app.add_option("--data", data, "the CSV of published step times");
  app.add_option("--source", only, "only the rows of this source_id");
  app.add_option("--csv", csv_out, "write one row per prediction");
  app.add_option("--host", host_arg, "FWD,BWD: the megatron_core runtime's host op overheads, us on DGX H100's CPU (an FP8 module call pays FWD twice)");
  app.add_option("--fit-host", fit_source,
                 "grid-search the host op overheads on this source_id's rows (all: every row); the others are held out");
  app.add_flag("--leave-one-source-out", loso, "fit the host op overheads on all sources but one and predict that one, for each");
  app.add_option("--write-workloads", workloads_dir,
                 "write each row's workload to DIR/<row_id>.json and print the perfcast predict command that explains it");
  CLI11_PARSE(app, argc, argv);
  auto rows = read_rows(data);
  if (rows.empty()) {
    std::fprintf(stderr, "error: %s: no rows (missing file?)\n", data.c_str());
    return 2;
  }
  if (!only.empty()) std::erase_if(rows, [&](const Row& r) { return r.at("source_id") != only; });
  std::vector<std::string> host;
  if (!host_arg.empty()) {
    double fwd = 0, bwd = 0;
    if (std::sscanf(host_arg.c_str(), "%lf,%lf", &fwd, &bwd) != 2 || fwd < 0 || bwd < 0) {
      std::fprintf(stderr, "error: --host %s: expected FWD,BWD in microseconds, e.g. 140,10\n", host_arg.c_str());
      return 2;
    }
    host = host_overrides(fwd, bwd);
  }
  if (!workloads_dir.empty()) return write_workloads(src, rows, workloads_dir);
  if (loso) {
    std::map<std::string, std::vector<Row>> by_source;
    for (const Row& r : rows) by_source[r.at("source_id")].push_back(r);
    std::printf("%-40s %5s %18s %10s %10s %8s\n", "source held out", "rows", "fit: fwd / bwd us", "geomean", "mean", "bias");
    std::vector<double> all;
    for (const auto& [source, held] : by_source) {
      std::vector<Row> train;
      for (const Row& r : rows)
        if (r.at("source_id") != source) train.push_back(r);
      const auto best = fit_host(src, train);
      std::vector<double> e;
      for (const Outcome& o : predict_rows(src, held, host_overrides(best.forward_us, best.backward_us))) e.push_back(o.predicted / o.measured - 1);
      all.insert(all.end(), e.begin(), e.end());
      const ErrorSummary sum = summarize_errors(e);
      std::printf("%-40s %5zu %11.0f / %3.0f %9.1f%% %9.1f%% %+7.1f%%\n", source.c_str(), e.size(), best.forward_us, best.backward_us,
                  100 * sum.geomean_abs, 100 * sum.mape, 100 * sum.mean_signed);
    }
    const ErrorSummary sum = summarize_errors(all);
    std::printf("%-40s %5zu %18s %9.1f%% %9.1f%% %+7.1f%%\n", "every row, held out", all.size(), "", 100 * sum.geomean_abs,
                100 * sum.mape, 100 * sum.mean_signed);
    return 0;
  }
  if (!fit_source.empty()) {
    std::vector<Row> train;
    for (const Row& r : rows)
      if (fit_source == "all" || r.at("source_id") == fit_source) train.push_back(r);
    if (train.empty()) {
      std::fprintf(stderr, "error: --fit-host %s: no row of that source_id\n", fit_source.c_str());
      return 2;
    }
    const auto best = fit_host(src, train);
    std::printf("fitted on %s (%zu rows): op_overhead %.0f us, backward_op_overhead %.0f us (mean |error| %.2f%%); "
                "the other sources' rows are held out\n\n",
                fit_source.c_str(), train.size(), best.forward_us, best.backward_us, 100 * best.error);
    host = host_overrides(best.forward_us, best.backward_us);
  }
  const std::vector<Outcome> outcomes = predict_rows(src, rows, host);
  std::map<std::string, std::vector<double>> errors;  // source / precision -> relative errors
  std::string csv =
      "row_id,source_id,model,gpus,precision,tp,pp,cp,vp,predicted_s,measured_s,error,predicted_mfu,fits,layer_micro_batches,"
      "gap_per_layer_micro_batch_ms,assumed\n";
  std::printf("%-12s %-30s %6s %5s %3s %3s %3s %3s %10s %10s %8s %6s %5s %9s\n", "row", "model", "GPUs", "prec", "tp", "pp", "cp", "vp",
              "predicted", "measured", "error", "MFU", "fits", "gap/l-mb");
  std::vector<double> per_lmb, gap_per_lmb;  // ms, per row: predicted time and gap per layer and micro-batch
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const Outcome& o = outcomes[i];
    const double err = o.predicted / o.measured - 1;
    const bool held_out = !fit_source.empty() && fit_source != "all" && r.at("source_id") != fit_source;
    errors[r.at("source_id") + " " + r.at("precision") + (held_out ? " (held out)" : "")].push_back(err);
    errors["all"].push_back(err);
    const double gap_ms = 1e3 * (o.measured - o.predicted) / o.layer_micro_batches;
    per_lmb.push_back(1e3 * o.predicted / o.layer_micro_batches);
    gap_per_lmb.push_back(gap_ms);
    std::printf("%-12s %-30s %6s %5s %3s %3s %3s %3s %9.3fs %9.3fs %+7.1f%% %5.1f%% %5s %6.2f ms %s\n", r.at("row_id").c_str(),
                r.at("model").c_str(), r.at("gpus").c_str(), r.at("precision").c_str(), r.at("tp").c_str(), r.at("pp").c_str(),
                r.at("cp").c_str(), r.at("vp").empty() ? "-" : r.at("vp").c_str(), o.predicted, o.measured, 100 * err,
                100 * o.mfu, o.fits ? "yes" : "NO", gap_ms, o.assumed.c_str());
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.4f},{},{:.6g},{:.6g},{}\n", r.at("row_id"),
                       r.at("source_id"), r.at("model"), r.at("gpus"), r.at("precision"), r.at("tp"), r.at("pp"), r.at("cp"),
                       r.at("vp"), o.predicted, o.measured, err, o.mfu, o.fits ? "yes" : "no", o.layer_micro_batches, gap_ms,
                       o.assumed);
  }
  std::printf("\n%-45s %5s %10s %10s %8s %8s\n", "rows", "n", "geomean", "mean", "bias", "max");
  for (const auto& [group, e] : errors) {
    const ErrorSummary s = summarize_errors(e);
    std::printf("%-45s %5zu %9.1f%% %9.1f%% %+7.1f%% %7.1f%%\n", group.c_str(), e.size(), 100 * s.geomean_abs, 100 * s.mape,
                100 * s.mean_signed, 100 * s.max_abs);
  }
  if (per_lmb.size() >= 3) {
    // Least squares gap = a + b x predicted, both per layer and micro-batch (ms).
    const auto n = static_cast<double>(per_lmb.size());
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < per_lmb.size(); ++i) {
      sx += per_lmb[i];
      sy += gap_per_lmb[i];
      sxx += per_lmb[i] * per_lmb[i];
      sxy += per_lmb[i] * gap_per_lmb[i];
    }
    const double b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
    std::printf("\ngap per layer and micro-batch against the predicted time per layer and micro-batch (%zu rows, least squares): "
                "%.2f ms + %.3f x predicted\n", per_lmb.size(), a, b);
  }
  if (!csv_out.empty()) std::ofstream(csv_out) << csv;
  return 0;
}
