// Predicts every row of the vTrain measurements (Megatron-DeepSpeed GPT on 2/4/8 A100,
// data/vtrain-a100-gpt/ground_truth_single.csv) on configs/systems/dgx_a100.json
// with the row's GPU count, and prints geomean |error|, MAPE, max error, the error per GPU
// count and the worst rows. Nothing is fitted: spec-derived predictors, calibrated
// all-reduce (dgx_a100.comms.json).
//
// Assumptions about the measured runs (not stated in the CSV; see README "Transformers"):
// GPT-2 BPE vocabulary 50,257 padded to a multiple of 128 x tp; fp16 mixed precision with
// fp16 gradient all-reduce; full activation recomputation per layer ("activation
// checkpointing on"); unfused attention (baddbmm + fused scale-mask-softmax + dropout);
// dropout 0.1; learned position embeddings; tied embeddings; ffn 4h, GeLU; non-distributed
// Adam; 1F1B.
//
// Usage: perfcast_vtrain_check [--csv FILE] [--system FILE] [--rows N] [--out predictions.csv]
//                              [--attention flash|unfused] [--worst K] [--host-op-overhead SECONDS]
//                              [--backward-op-overhead SECONDS] [--fit-host 1|2] [--runtime NAME]
//                              [--max-held-out-geomean X] [--json FILE]
// --runtime applies configs/runtimes/NAME.json's host costs as predict does (the shipped
// defaults); --max-held-out-geomean exits 1 when the 4- and 8-GPU rows' geomean |error|
// exceeds X (a fraction). --json writes the error summaries (bench/accuracy_json.hpp).
// --out also writes rank 0's compute-stream, collective and host busy ms per row.
// --fit-host 1 fits the one host constant HostSpec::op_overhead (grid 10-400 us) on the
// 2-GPU rows only and reports the error of the held-out 4- and 8-GPU rows with it.
// --backward-op-overhead sets HostSpec::backward_op_overhead: backward (autograd) ops pay
// this host time instead of op_overhead; the recomputed forward keeps op_overhead.
// Megatron's forward and recompute run module by module in Python, the backward mostly
// in the C++ autograd engine. --fit-host 2 fits both on the 2-GPU rows (2-D grid).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/accuracy_json.hpp"
#include "model/predict/predict.hpp"
#include "model/predict/runtime_profile.hpp"
#include "model/sim/simulator.hpp"
#include "model/graph/transformer_builder.hpp"
#include "core/error_stats.hpp"

using namespace perfcast;

namespace {

struct Row {
  int gpus = 0, global_batch = 0, micro_batch = 0, hidden = 0, heads = 0, layers = 0, seq = 0, tp = 0, dp = 0, pp = 0;
  double measured_ms = 0;
};

std::vector<Row> read_rows(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<Row> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream ss(line);
    Row r;
    ss >> r.gpus >> r.global_batch >> r.micro_batch >> r.hidden >> r.heads >> r.layers >> r.seq >> r.tp >> r.dp >> r.pp >>
        r.measured_ms;
    if (!ss) throw std::runtime_error("bad row in " + path + ": " + line);
    rows.push_back(r);
  }
  return rows;
}

TransformerSpec spec_of(const Row& r, AttentionImpl attention) {
  TransformerSpec w;
  w.name = fmt::format("GPT h{} L{} mb{} gb{} tp{} dp{} pp{}", r.hidden, r.layers, r.micro_batch, r.global_batch, r.tp, r.dp, r.pp);
  w.file = "vtrain-row";
  w.kind = TransformerKind::kDecoder;
  w.hidden = r.hidden;
  w.heads = w.kv_heads = r.heads;
  w.layers = r.layers;
  w.seq_len = r.seq;
  w.vocab = 50257;
  w.ffn_hidden = 4 * r.hidden;
  w.precision = DType::kFp16;
  w.grad_reduce_dtype = DType::kFp16;
  w.micro_batch = r.micro_batch;
  w.global_batch = r.global_batch;
  w.recompute = Recompute::kFull;
  w.attention = attention;
  w.dropout = 0.1;
  w.tp = r.tp;
  w.pp = r.pp;
  w.dp = r.dp;
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string src = PERFCAST_SOURCE_DIR;
  std::string csv = src + "/data/vtrain-a100-gpt/ground_truth_single.csv";
  std::string system = src + "/configs/systems/dgx_a100.json";
  std::string out;
  std::size_t max_rows = 0, worst = 10;
  AttentionImpl attention = AttentionImpl::kUnfused;
  double op_overhead = -1, backward_overhead = -1;
  int fit_host = 0;
  std::string runtime;       // --runtime NAME: configs/runtimes/NAME.json's host costs, as predict applies them
  double max_held_out = -1;  // --max-held-out-geomean X: exit 1 when the 4+8-GPU rows' geomean |error| exceeds X
  std::string json_out;      // --json FILE: the error summaries, bench/accuracy_json.hpp
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--csv") csv = v;
    else if (a == "--system") system = v;
    else if (a == "--rows") max_rows = std::stoul(v);
    else if (a == "--out") out = v;
    else if (a == "--worst") worst = std::stoul(v);
    else if (a == "--host-op-overhead") op_overhead = std::stod(v);
    else if (a == "--fit-host") fit_host = std::stoi(v);
    else if (a == "--backward-op-overhead") backward_overhead = std::stod(v);
    else if (a == "--attention") attention = v == "flash" ? AttentionImpl::kFlash : AttentionImpl::kUnfused;
    else if (a == "--runtime") runtime = v;
    else if (a == "--max-held-out-geomean") max_held_out = std::stod(v);
    else if (a == "--json") json_out = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (!std::filesystem::exists(csv)) {
    std::fprintf(stderr, "no data file %s\n", csv.c_str());
    return 2;
  }
  try {
    std::optional<RuntimeProfile> profile;
    if (!runtime.empty()) profile = load_runtime_profile(runtime, src + "/configs/workloads/gpt2.json", true);
    std::vector<Row> rows = read_rows(csv);
    if (max_rows > 0 && rows.size() > max_rows) rows.resize(max_rows);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<double> errors, predicted;
    std::map<int, std::vector<double>> by_gpus, by_pp, by_tp;
    // Rank 0's busy times in the reported iteration, ms: compute stream, collectives, host.
    struct Busy {
      double compute = 0, comm = 0, host = 0;
    };
    std::vector<Busy> busy;
    auto predict_ms = [&](const Row& r, double overhead, Busy* b = nullptr) {
      JsonDocument doc = load_json_file(system);
      apply_override(doc, "gpus_per_node", std::to_string(r.gpus));
      SystemSpec sys = parse_system(doc);
      if (profile) apply_runtime(sys, *profile);
      if (overhead >= 0) sys.host.op_overhead = overhead;
      // Backward (autograd) ops pay their own host overhead when one is given (HostSpec).
      if (backward_overhead >= 0) sys.host.backward_op_overhead = backward_overhead;
      const std::unique_ptr<Prediction> p = predict_transformer(std::move(sys), spec_of(r, attention), {}, 2);
      if (b != nullptr && !p->analysis.ranks.empty()) {
        const RankBreakdown& k = p->analysis.ranks.front();
        *b = Busy{k.compute_busy * 1e3, k.communication_busy * 1e3, k.host_busy * 1e3};
      }
      return p->timeline.iteration_time * 1e3;
    };
    if (fit_host > 0) {
      // Grid search on the 2-GPU rows only. Mode 1: one op_overhead for every op. Mode 2:
      // op_overhead for forward and recomputed-forward ops, and a separate host overhead
      // for backward (autograd) ops.
      const std::vector<double> fwd_grid =
          fit_host == 1 ? std::vector<double>{10, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 250, 300, 400}
                        : std::vector<double>{60, 80, 100, 110, 120, 130, 140, 150, 160, 180, 200};
      const std::vector<double> bwd_grid = fit_host == 1 ? std::vector<double>{-1} : std::vector<double>{0, 5, 10, 20, 30, 50, 70, 100};
      double best = -1, best_bwd = -1, best_err = 1e30;
      for (double us : fwd_grid) {
        for (double bus : bwd_grid) {
          backward_overhead = bus < 0 ? -1 : bus * 1e-6;
          std::vector<double> e;
          for (const Row& r : rows)
            if (r.gpus == 2) e.push_back(relative_error(predict_ms(r, us * 1e-6), r.measured_ms));
          const double g = summarize_errors(e).geomean_abs;
          if (bus < 0) {
            std::printf("fit on 2-GPU rows: op_overhead %5.0f us -> geomean |e| %.2f%%\n", us, 100 * g);
          } else {
            std::printf("fit on 2-GPU rows: op_overhead %5.0f us, backward %4.0f us -> geomean |e| %.2f%%\n", us, bus, 100 * g);
          }
          if (g < best_err) best_err = g, best = us * 1e-6, best_bwd = backward_overhead;
        }
      }
      op_overhead = best;
      backward_overhead = best_bwd;
      std::printf("fitted op_overhead %.0f us", best * 1e6);
      if (best_bwd >= 0) std::printf(", backward op overhead %.0f us", best_bwd * 1e6);
      std::printf(" on the 2-GPU rows; the 2-GPU rows below are the training set, the 4- and 8-GPU rows held out\n\n");
    }
    std::vector<double> held_out;
    for (const Row& r : rows) {
      Busy b;
      const double ms = predict_ms(r, op_overhead, &b);
      predicted.push_back(ms);
      busy.push_back(b);
      const double e = relative_error(ms, r.measured_ms);
      errors.push_back(e);
      if (r.gpus != 2) held_out.push_back(e);
      by_gpus[r.gpus].push_back(e);
      by_pp[r.pp].push_back(e);
      by_tp[r.tp].push_back(e);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto line = [](const std::string& label, const std::vector<double>& e) {
      const ErrorSummary s = summarize_errors(e);
      std::printf("%-12s %6zu %10.2f%% %8.2f%% %8.2f%% %+9.2f%%\n", label.c_str(), s.count, 100 * s.geomean_abs, 100 * s.mape,
                  100 * s.max_abs, 100 * s.mean_signed);
    };
    std::printf("vTrain A100 GPT rows (%s), %s attention, predicted on %s in %.1f s\n\n", csv.c_str(),
                attention == AttentionImpl::kFlash ? "flash" : "unfused", system.c_str(), secs);
    std::printf("%-12s %6s %11s %9s %9s %10s\n", "subset", "rows", "geomean|e|", "MAPE", "max|e|", "bias");
    line("all", errors);
    if ((fit_host > 0 || max_held_out >= 0) && !held_out.empty()) line("held out", held_out);
    for (const auto& [g, e] : by_gpus) line(fmt::format("{} GPUs", g), e);
    for (const auto& [g, e] : by_tp) line(fmt::format("tp {}", g), e);
    for (const auto& [g, e] : by_pp) line(fmt::format("pp {}", g), e);
    std::vector<std::size_t> order(rows.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return std::fabs(errors[a]) > std::fabs(errors[b]); });
    std::printf("\nworst rows (gpus gb mb h layers tp dp pp: measured -> predicted ms):\n");
    for (std::size_t k = 0; k < std::min(worst, order.size()); ++k) {
      const Row& r = rows[order[k]];
      std::printf("  %d %3d %d %d %2d %d %d %d: %8.1f -> %8.1f  %+6.1f%%\n", r.gpus, r.global_batch, r.micro_batch, r.hidden,
                  r.layers, r.tp, r.dp, r.pp, r.measured_ms, predicted[order[k]], 100 * errors[order[k]]);
    }
    if (!out.empty()) {
      std::ofstream f(out);
      f << "gpus,global_batch,micro_batch,hidden,heads,layers,seq,tp,dp,pp,measured_ms,predicted_ms,error,"
           "rank0_compute_busy_ms,rank0_comm_busy_ms,rank0_host_busy_ms\n";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        f << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.3f},{:.5f},{:.3f},{:.3f},{:.3f}\n", r.gpus, r.global_batch,
                         r.micro_batch, r.hidden, r.heads, r.layers, r.seq, r.tp, r.dp, r.pp, r.measured_ms, predicted[i],
                         errors[i], busy[i].compute, busy[i].comm, busy[i].host);
      }
    }
    std::map<std::string, std::vector<double>> subsets{{"all", errors}};
    if (!held_out.empty()) subsets["held_out_4_8_gpus"] = held_out;
    for (const auto& [g, e] : by_gpus) subsets[fmt::format("gpus_{}", g)] = e;
    for (const auto& [g, e] : by_tp) subsets[fmt::format("tp_{}", g)] = e;
    for (const auto& [g, e] : by_pp) subsets[fmt::format("pp_{}", g)] = e;
    bench::write_accuracy_json(json_out, "vtrain", subsets, {{"runtime", runtime}, {"rows", rows.size()}});
    if (max_held_out >= 0) {
      const double g = summarize_errors(held_out).geomean_abs;
      std::printf("\nheld-out (4- and 8-GPU rows) geomean |error| %.2f%%: %s the %.2f%% bound\n", 100 * g,
                  g <= max_held_out ? "within" : "ABOVE", 100 * max_held_out);
      if (!(g <= max_held_out)) return 1;
    }
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "error: %s: %s: %s\n", e.file().c_str(), e.pointer().c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
