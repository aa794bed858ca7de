// Kernel model 2 (predictors/public_kernel_fit.hpp, kernel_calibration.hpp): hand-worked
// predictions, the fit recovering known efficiencies, source weighting and leave one source out.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "core/json_reader.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/kernel_rows.hpp"
#include "predictors/public_kernel_fit.hpp"
#include "predictors/spec_predictors.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_public_kernel_fit_test {

using namespace perfcast;

namespace {

GpuSpec gpu(const char* system) { return load_system(std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/" + system + ".json").gpu; }

KernelCalibration model2(std::vector<FamilyFit> fits) {
  KernelCalibration c;
  c.kernel_model = 2;
  c.basis = "public measurements";
  c.fits = std::move(fits);
  return c;
}

FamilyFit family(const std::string& name, double e_compute, double e_memory, Seconds overhead) {
  FamilyFit f;
  f.family = name;
  f.compute_efficiency = e_compute;
  f.memory_efficiency = e_memory;
  f.overhead = overhead;
  return f;
}

/// A row of `source` measured at `time` s.
KernelRow row(const std::string& source, KernelDesc k, Seconds time, const std::string& gpu_class = "H100 SXM") {
  KernelRow r;
  r.source = source;
  r.gpu_class = gpu_class;
  r.kernels = {std::move(k)};
  r.measured = time;
  r.table = std::holds_alternative<GemmDesc>(r.kernels.front()) ? "gemm" : "memory_bound";
  return r;
}

}  // namespace

TEST_CASE("kernel model 2 picks the tile whose waves finish first, hand-worked", "[kernel_model2]") {
  const GpuSpec h100 = gpu("h100_sxm");
  // 3080 x 128 x 200 fp32 (SIMT tiles 64..128): 128 x 128 makes 25 tiles, one wave of
  // 128 x 128; 64 x 64 makes 49 x 2 = 98 tiles, still one wave of 132 SMs, of a quarter the
  // work: 2 x 64 x 64 x 200 FLOPs at 67 / 132 TFLOP/s per SM.
  const GemmWork fp32 = gemm_work(GemmDesc{3080, 128, 200, 1, DType::kFp32}, h100, kHopperGemmTiling);
  CHECK(fp32.compute_at_peak == Approx(2.0 * 64 * 64 * 200 / (67e12 / 132)));
  // The spec tiling keeps the power of two above each edge: one wave of 128 x 128.
  const GemmWork spec = gemm_work(GemmDesc{3080, 128, 200, 1, DType::kFp32}, h100, kSpecGemmTiling);
  CHECK(spec.compute_at_peak == Approx(2.0 * 128 * 128 * 200 / (67e12 / 132)));
  // 384 x 4104 x 72 bf16, waves x tile area: 128 x 256 gives 3 x 17 = 51 tiles, one wave
  // (32768); 128 x 128 (99 tiles), 64 x 256 (102) one wave and 128 x 64 (195), 64 x 128 (198)
  // two waves all give 16384; 64 x 64 gives 6 x 65 = 390 tiles, 3 waves: 12288, the least.
  const GemmWork bf16 = gemm_work(GemmDesc{384, 4104, 72, 1, DType::kBf16}, h100, kHopperGemmTiling);
  CHECK(bf16.compute_at_peak == Approx(3 * 2.0 * 64 * 64 * 72 / (989.4e12 / 132)));
  // Never faster than the GEMM's FLOPs at the peak, whichever tile.
  for (const auto& g : {GemmDesc{3080, 128, 200, 1, DType::kFp32}, GemmDesc{384, 4104, 72, 1, DType::kBf16},
                        GemmDesc{33, 4097, 1000, 3, DType::kTf32}, GemmDesc{8192, 8192, 8192, 1, DType::kBf16}}) {
    const GemmWork w = gemm_work(g, h100, kHopperGemmTiling);
    CHECK(w.compute_at_peak >= w.flops / h100.peak(g.dtype) * (1 - 1e-12));
  }
}

TEST_CASE("kernel model 2: a GEMM on Hopper tiles, hand-worked", "[kernel_model2]") {
  const GpuSpec h100 = gpu("h100_sxm");
  // 4096^3 bf16: tiles 128 x 256 -> 32 x 16 = 512 tiles, ceil(512 / 132) = 4 waves; per SM
  // 989.4 / 132 TFLOP/s; one wave 2 x 128 x 256 x 4096 FLOPs.
  const GemmDesc g{4096, 4096, 4096, 1, DType::kBf16};
  const GemmWork w = gemm_work(g, h100, kHopperGemmTiling);
  const double per_sm = 989.4e12 / 132;
  CHECK(w.compute_at_peak == Approx(4 * 2.0 * 128 * 256 * 4096 / per_sm));
  const KernelCalibration cal = model2({family("gemm.bf16", 0.5, 0.8, 2e-6)});
  const Estimate e = predict_with_calibration(g, h100, &cal);
  CHECK(e.calibrated);
  CHECK(e.bound == "compute");
  CHECK(e.time == Approx(2e-6 + 4 * 2.0 * 128 * 256 * 4096 / per_sm / 0.5));
  // fp16 shares the bf16 family; an fp8 GEMM has none here and stays spec-derived.
  CHECK(predict_with_calibration(GemmDesc{4096, 4096, 4096, 1, DType::kFp16}, h100, &cal).calibrated);
  CHECK_FALSE(predict_with_calibration(GemmDesc{4096, 4096, 4096, 1, DType::kFp8}, h100, &cal).calibrated);
  // Skinny: M = 1 reads the 4096 x 4096 weights once: memory-bound at 0.8 of 3.35 TB/s.
  const GemmDesc skinny{1, 4096, 4096, 1, DType::kBf16};
  const double bytes = (4096.0 + 4096.0 * 4096 + 4096) * 2;
  const Estimate s = predict_with_calibration(skinny, h100, &cal);
  CHECK(s.bound == "memory");
  CHECK(s.time == Approx(2e-6 + bytes / 3.35e12 / 0.8));
}

TEST_CASE("kernel model 2: library families fall back to the dtype's", "[kernel_model2]") {
  GemmDesc g{64, 7168, 2048, 1, DType::kFp8};
  g.block_scaled = true;
  g.impl = GemmImpl::kTriton;
  CHECK(model2_families(g) == std::vector<std::string>{"gemm.fp8_block.triton", "gemm.fp8_block"});
  const GpuSpec h100 = gpu("h100_sxm");
  const KernelCalibration only_block = model2({family("gemm.fp8_block", 0.6, 0.9, 4e-6)});
  const KernelCalibration both = model2({family("gemm.fp8_block", 0.6, 0.9, 4e-6), family("gemm.fp8_block.triton", 0.3, 0.6, 20e-6)});
  const double fallback = predict_with_calibration(g, h100, &only_block).time, own = predict_with_calibration(g, h100, &both).time;
  CHECK(own > fallback);
  AttentionDesc a;
  a.seq_q = a.seq_kv = 4096;
  a.head_dim = 128;
  a.impl = AttentionKernel::kCudnn;
  CHECK(model2_families(a) == std::vector<std::string>{"attention_forward.cudnn.bf16", "attention_forward.bf16"});
  // fp16 has bf16's tensor-core rate: without an fp16 family of its own, an fp16 kernel is
  // predicted by its implementation's bf16 family, not by another implementation's fp16 one.
  a.dtype = DType::kFp16;
  a.impl = AttentionKernel::kFlash2;
  CHECK(model2_families(a) ==
        std::vector<std::string>{"attention_forward.flash2.fp16", "attention_forward.flash2.bf16", "attention_forward.bf16"});
  const KernelCalibration cudnn_fp16_only =
      model2({family("attention_forward.cudnn.fp16", 0.65, 0.9, 2e-6), family("attention_forward.flash2.bf16", 0.35, 0.9, 2e-6)});
  const KernelCalibration flash_bf16_only = model2({family("attention_forward.flash2.bf16", 0.35, 0.9, 2e-6)});
  CHECK(predict_with_calibration(a, h100, &cudnn_fp16_only).time == Approx(predict_with_calibration(a, h100, &flash_bf16_only).time));
}

TEST_CASE("attention work: the mask in 128 x 128 blocks, waves and head dims", "[kernel_model2]") {
  const GpuSpec h100 = gpu("h100_sxm");
  AttentionDesc a;
  a.batch = 1;
  a.heads = 132;  // one wave of 132 query tiles of 128
  a.kv_heads = 132;
  a.seq_q = a.seq_kv = 128;
  a.head_dim = 128;
  const AttentionWork full = attention_work(a, h100);
  CHECK(full.mask_fraction == 1.0);
  CHECK(full.flops == Approx(2.0 * 132 * 128 * 128 * 256));
  CHECK(full.compute_at_peak == Approx(full.flops / 989.4e12));
  a.causal = true;
  a.seq_q = a.seq_kv = 256;  // 2 x 2 blocks, causal keeps 3
  a.heads = 66;              // 132 tiles again
  a.kv_heads = 66;
  CHECK(attention_work(a, h100).mask_fraction == Approx(0.75));
  a.seq_q = a.seq_kv = 1024;  // 8 x 8 blocks: causal keeps 36 of 64
  CHECK(attention_work(a, h100).mask_fraction == Approx(36.0 / 64));
  a.window = 128;  // each 128-query block sees its own and the previous key block: 1 + 7 x 2 = 15
  CHECK(attention_work(a, h100).mask_fraction == Approx(15.0 / 64));
  // Head dim 64: half the FLOPs per score, sqrt(2) slower per FLOP.
  AttentionDesc b;
  b.heads = b.kv_heads = 132;
  b.seq_q = b.seq_kv = 128;
  b.head_dim = 64;
  CHECK(attention_work(b, h100).compute_at_peak == Approx(full.compute_at_peak / 2 * std::sqrt(2.0)));
  // 133 tiles take two waves.
  b.head_dim = 128;
  b.heads = b.kv_heads = 133;
  CHECK(attention_work(b, h100).compute_at_peak == Approx(full.flops / 132 * 133 / 989.4e12 * 2 * 132 / 133));
}

TEST_CASE("kernel model 2: memory-bound kernels with an L2-resident regime, hand-worked", "[kernel_model2]") {
  const GpuSpec h200 = gpu("h200");
  FamilyFit f = family("elementwise", 0, 0.7, 1.5e-6);
  f.l2_efficiency = 0.9;
  f.l2_resident_share = 0.5;  // C = 25 MB of the 50 MB L2
  const KernelCalibration cal = model2({f});
  ElementwiseDesc e{"scale", 30'000'000, 0, 1};  // 30 MB warm: h = (50 - 30) / 25 = 0.8
  CHECK(predict_with_calibration(e, h200, &cal).time == Approx(1.5e-6 + 30e6 * 0.2 / (4.8e12 * 0.7) + 30e6 * 0.8 / (5.5e12 * 0.9)));
  e.cold_l2 = true;
  CHECK(predict_with_calibration(e, h200, &cal).time == Approx(1.5e-6 + 30e6 / (4.8e12 * 0.7)));
  ElementwiseDesc big{"scale", 1'000'000'000, 0, 1};
  CHECK(predict_with_calibration(big, h200, &cal).bound == "memory");
}

TEST_CASE("kernel model 2: a kernel of one thread per element pays its waves of resident threads, hand-worked",
          "[kernel_model2]") {
  const GpuSpec h200 = gpu("h200");  // 132 SMs: 270,336 resident threads
  FamilyFit f = family("elementwise", 0, 0.8, 1.3e-6);
  f.wave_time = 0.25e-6;
  const KernelCalibration cal = model2({f});
  ElementwiseDesc e{"scale", 132 * 2048 * 10, 0, 16};  // 10 waves of 16 B per element
  e.cold_l2 = true;
  const double bytes = 132.0 * 2048 * 10 * 16;  // 43.25 MB: 11.26 us at 0.8 x 4.8 TB/s
  CHECK(thread_waves(e, h200) == 0.0);  // not stated: the bytes' time alone
  CHECK(predict_with_calibration(e, h200, &cal).time == Approx(1.3e-6 + bytes / (4.8e12 * 0.8)));
  e.thread_per_element = true;
  CHECK(thread_waves(e, h200) == Approx(10.0));
  CHECK(predict_with_calibration(e, h200, &cal).time == Approx(1.3e-6 + bytes / (4.8e12 * 0.8) + 10 * 0.25e-6));
  // A GPU without an SM count has no waves.
  GpuSpec unknown = h200;
  unknown.sm_count = 0;
  CHECK(thread_waves(e, unknown) == 0.0);
}

TEST_CASE("the fit recovers known efficiencies", "[kernel_model2][fit]") {
  const GpuSpec h100 = gpu("h100_sxm");
  const KernelCalibration truth = model2({family("gemm.bf16", 0.62, 0.75, 6e-6)});
  std::vector<KernelRow> rows;
  for (std::int64_t m : {1, 8, 64, 256, 1024, 4096, 8192})
    for (std::int64_t n : {4096, 8192, 28672}) {
      const GemmDesc g{m, n, 8192, 1, DType::kBf16};
      rows.push_back(row(m % 2 ? "a" : "b", g, predict_with_calibration(g, h100, &truth).time));
    }
  std::vector<FitSample> samples;
  for (const auto& r : rows) samples.push_back({&r, h100});
  const PublicKernelFit fit = fit_public_kernels(samples);
  REQUIRE(fit.families.size() == 1);
  const FamilyFit& f = fit.families.front();
  CHECK(f.family == "gemm.bf16");
  CHECK(f.compute_efficiency == Approx(0.62).epsilon(1e-3));
  CHECK(f.memory_efficiency == Approx(0.75).epsilon(1e-3));
  CHECK(f.overhead == Approx(6e-6).epsilon(1e-2));
  CHECK(f.train_samples == rows.size());
  CHECK(f.sources == std::vector<std::string>{"a", "b"});
}

TEST_CASE("memory-bound fit: per-GPU HBM share, launch floor and L2 regime", "[kernel_model2][fit]") {
  const GpuSpec h100 = gpu("h100_sxm"), h200 = gpu("h200");
  FamilyFit f = family("elementwise", 0, 0, 1.3e-6);
  f.l2_efficiency = 0.9;
  f.l2_resident_share = 0.65;
  FamilyFit f100 = f, f200 = f;
  f100.memory_efficiency = 0.9;
  f200.memory_efficiency = 0.7;
  const KernelCalibration c100 = model2({f100}), c200 = model2({f200});
  std::vector<KernelRow> rows;
  std::vector<const GpuSpec*> specs;
  for (double bytes = 64e3; bytes < 2e9; bytes *= 1.6) {
    rows.push_back(row("warm", ElementwiseDesc{"scale", static_cast<std::int64_t>(bytes), 0, 1},
                       predict_with_calibration(ElementwiseDesc{"scale", static_cast<std::int64_t>(bytes), 0, 1}, h200, &c200).time, "H200"));
    specs.push_back(&h200);
    ElementwiseDesc cold{"copy", static_cast<std::int64_t>(bytes), 0, 1};
    cold.cold_l2 = true;
    rows.push_back(row("cold", cold, predict_with_calibration(cold, h100, &c100).time));
    specs.push_back(&h100);
  }
  std::vector<FitSample> samples;
  for (std::size_t i = 0; i < rows.size(); ++i) samples.push_back({&rows[i], *specs[i]});
  const PublicKernelFit fit = fit_public_kernels(samples);
  CHECK(fit.elementwise.overhead == Approx(1.3e-6).epsilon(1e-2));
  CHECK(fit.elementwise.l2_resident_share == Approx(0.65));
  CHECK(fit.elementwise.l2_efficiency == Approx(0.9).epsilon(1e-2));
  CHECK(fit.memory_efficiency_by_class.at("H100 SXM") == Approx(0.9).epsilon(1e-3));
  CHECK(fit.memory_efficiency_by_class.at("H200") == Approx(0.7).epsilon(1e-3));
  // Each class's calibration carries its own HBM share.
  CHECK(fit.calibration_for("H200").find("elementwise")->memory_efficiency == Approx(0.7).epsilon(1e-3));
}

TEST_CASE("memory-bound fit: the time per wave of a kernel of one thread per element", "[kernel_model2][fit]") {
  const GpuSpec h200 = gpu("h200");
  FamilyFit f = family("elementwise", 0, 0.83, 1.3e-6);
  f.wave_time = 0.3e-6;
  const KernelCalibration truth = model2({f});
  std::vector<KernelRow> rows;
  for (double elements = 1e6; elements < 3e8; elements *= 2) {
    ElementwiseDesc plain{"scale", static_cast<std::int64_t>(elements), 0, 16};
    plain.cold_l2 = true;
    plain.thread_per_element = true;
    rows.push_back(row("plain", plain, predict_with_calibration(plain, h200, &truth).time, "H200"));
    ElementwiseDesc vectorised = plain;
    vectorised.thread_per_element = false;
    rows.push_back(row("vectorised", vectorised, predict_with_calibration(vectorised, h200, &truth).time, "H200"));
  }
  std::vector<FitSample> samples;
  for (const auto& r : rows) samples.push_back({&r, h200});
  const PublicKernelFit fit = fit_public_kernels(samples);
  CHECK(fit.elementwise.wave_time == Approx(0.3e-6).epsilon(1e-2));
  CHECK(fit.memory_efficiency_by_class.at("H200") == Approx(0.83).epsilon(1e-3));
  CHECK(fit.calibration_for("H200").find("elementwise")->wave_time == Approx(0.3e-6).epsilon(1e-2));
}

TEST_CASE("one large source does not drown a small one; a held-out source is predicted by the others", "[kernel_model2][fit]") {
  const GpuSpec h100 = gpu("h100_sxm");
  const KernelCalibration slow = model2({family("gemm.bf16", 0.4, 0.8, 3e-6)}), fast = model2({family("gemm.bf16", 0.8, 0.8, 3e-6)});
  std::vector<KernelRow> rows;
  for (int i = 0; i < 60; ++i) {
    const GemmDesc g{2048 + 64 * i, 8192, 8192, 1, DType::kBf16};
    rows.push_back(row("big", g, predict_with_calibration(g, h100, &slow).time));
  }
  for (int i = 0; i < 3; ++i) {
    const GemmDesc g{4096 + 512 * i, 4096, 4096, 1, DType::kBf16};
    rows.push_back(row("small", g, predict_with_calibration(g, h100, &fast).time));
  }
  std::vector<FitSample> samples;
  for (const auto& r : rows) samples.push_back({&r, h100});
  const double e = fit_public_kernels(samples).families.front().compute_efficiency;
  // By rows the big source would decide alone (0.4); by sources the fit lies between.
  CHECK(e > 0.45);
  CHECK(e < 0.8);
  const HeldOutPredictions held = leave_one_source_out(samples);
  // The small source's rows predicted by the big source's fit: twice as slow.
  CHECK(held.kernel.back() / rows.back().measured == Approx(2.0).epsilon(0.02));
  CHECK(held.kernel.front() / rows.front().measured == Approx(0.5).epsilon(0.02));
  CHECK(held.harness.back() == 0.0);  // neither source is harness-timed
}

TEST_CASE("a harness-timed source: its per-call cost fitted as its own, never a kernel's; held out, scored after its own constant",
          "[kernel_model2][fit]") {
  const GpuSpec h100 = gpu("h100_sxm");
  const KernelCalibration truth = model2({family("gemm.bf16", 0.7, 0.85, 2e-6)});
  std::vector<KernelRow> rows;
  for (int i = 0; i < 40; ++i) {  // CUPTI-like kernel times, 2 us of overhead, 64 .. 4,096 on a side
    const GemmDesc g{64 << (i % 7), 64 << ((i / 7) % 7), 256 + 128 * i, 1, DType::kBf16};
    rows.push_back(row("kernel_times", g, predict_with_calibration(g, h100, &truth).time));
  }
  for (int i = 0; i < 20; ++i) {  // the same model plus 20 us per call: a harness's cost
    const GemmDesc g{512 + 256 * i, 1024, 2048, 1, DType::kBf16};
    KernelRow r = row("harness_timed", g, predict_with_calibration(g, h100, &truth).time + 20e-6);
    r.harness_overhead = true;
    rows.push_back(r);
  }
  std::vector<FitSample> samples;
  for (const auto& r : rows) samples.push_back({&r, h100});
  const PublicKernelFit fit = fit_public_kernels(samples);
  // The intercept goes to the harness, not to every kernel's overhead.
  CHECK(fit.families.front().overhead == Approx(2e-6).epsilon(0.05));
  CHECK(fit.harness_cost(rows.back()) == Approx(20e-6).epsilon(0.05));
  CHECK(fit.harness_cost(rows.front()) == 0.0);
  const HeldOutPredictions held = leave_one_source_out(samples);
  // Held out: the kernels' time from the other source's fit, 20 us short of each row; the
  // source's own constant (a weighted median of the gaps) makes up the harness.
  CHECK(held.harness.back() == Approx(20e-6).epsilon(0.05));
  CHECK(held.harness.front() == 0.0);
  CHECK((held.kernel.back() + held.harness.back()) / rows.back().measured == Approx(1.0).epsilon(0.02));
  CHECK(held.kernel.back() / rows.back().measured < 0.9);
}

TEST_CASE("kernel model 2 calibrations round-trip through their file", "[kernel_model2]") {
  FamilyFit f = family("elementwise", 0, 0.7, 1.5e-6);
  f.l2_efficiency = 0.9;
  f.l2_resident_share = 0.55;
  f.wave_time = 0.21e-6;
  f.sources = {"gpu_benches_small_kernels", "quack_notes"};
  f.heldout_samples = 10;
  f.heldout_geomean_abs_error = 0.05;
  KernelCalibration c = model2({f, family("attention_forward.cudnn.bf16", 0.65, 0.7, 5e-6)});
  c.gpu = "NVIDIA H200 SXM 141GB";
  const std::string text = kernel_calibration_to_json(c);
  const KernelCalibration back = parse_kernel_calibration({nlohmann::json::parse(text), "cal.json"});
  CHECK(back.kernel_model == 2);
  CHECK(back.basis == "public measurements");
  REQUIRE(back.find("elementwise"));
  CHECK(back.find("elementwise")->l2_resident_share == Approx(0.55));
  CHECK(back.find("elementwise")->wave_time == Approx(0.21e-6));
  CHECK(back.find("elementwise")->sources == f.sources);
  CHECK(back.find("attention_forward.cudnn.bf16")->compute_efficiency == Approx(0.65));
}

}  // namespace perfcast_test_predictors_public_kernel_fit_test
