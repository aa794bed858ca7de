// Kernel measurements from Kineto traces (model/trace_measurements.*), their JSON-lines
// round trip, fitting them (bounded efficiencies, provenance) and `replay --kernels
// predicted` with a kernel calibration and a held-out selection. Hand-worked values on
// tests/data/kineto_shapes.json (one V100 rank: addmm + split-K reduce, relu, FBGEMM TBE
// forward and backward with its sort, cumsum, NCCL all-reduce, 4 KiB H2D copy) and
// tests/data/kineto_two_steps.json (two steps: linear, relu, D2H copy | mul, H2D copy;
// relu_kernel and mul_kernel are unrecognized names).
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model/traces/kineto_trace.hpp"
#include "model/traces/trace_measurements.hpp"
#include "model/traces/trace_replay.hpp"
#include "predictors/kernel_calibration.hpp"
#include "predictors/measurement.hpp"
#include "core/json_reader.hpp"
#include "topology/system_spec.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_trace_measurements_test {

using namespace perfcast;

namespace {

constexpr double us = 1e-6;
const std::string kData = std::string(PERFCAST_SOURCE_DIR) + "/tests/data/";
const std::string kV100 = std::string(PERFCAST_SOURCE_DIR) + "/configs/systems/dgx1_v100.json";

KinetoTrace load(const std::string& name) { return load_kineto_traces({kData + name}).at(0); }

std::string family_of(const Measurement& m) { return calibration_family(m.kernel); }

}  // namespace

TEST_CASE("trace measurements: one line per recognized op, kernels of a group summed", "[trace_measurements]") {
  const KinetoTrace t = load("kineto_shapes.json");
  const auto ms = trace_measurements(t, 0, nullptr, {});
  // addmm (+ split-K reduce), relu, TBE forward, H2D copy, TBE backward (+ sort); the cumsum
  // (no predictor) and the NCCL all-reduce (collective model) are not written.
  REQUIRE(ms.size() == 5);
  CHECK(family_of(ms[0]) == "gemm.fp32");
  const auto g = std::get<GemmDesc>(ms[0].kernel);
  CHECK((g.m == 16 && g.n == 256 && g.k == 13));
  CHECK(ms[0].timing.median == Approx(12 * us));  // 10 us GEMM + 2 us split-K reduce
  CHECK(ms[0].kernel_name == "volta_sgemm_128x32_nt");
  CHECK(family_of(ms[1]) == "elementwise");
  CHECK(std::get<ElementwiseDesc>(ms[1].kernel).elements == 4096);
  CHECK(ms[1].timing.median == Approx(3 * us));
  CHECK(family_of(ms[2]) == "embedding_forward");
  CHECK(ms[2].timing.median == Approx(20 * us));
  CHECK(family_of(ms[3]) == "memcpy.h2d");
  CHECK(std::get<MemcpyDesc>(ms[3].kernel).bytes == 4096);
  CHECK(ms[3].timing.median == Approx(3 * us));
  CHECK(family_of(ms[4]) == "embedding_backward");
  CHECK(ms[4].timing.median == Approx(35 * us));  // 5 us sort + 30 us backward
  for (const auto& m : ms) {
    CHECK(m.timing.timer == "kineto");
    CHECK(m.timing.repetitions == 1);
    CHECK(m.timing.mean == m.timing.median);
    CHECK(m.timing.p10 == m.timing.median);
    CHECK(m.timing.p90 == m.timing.median);
    CHECK(m.device.name == "Tesla V100-SXM2-32GB");
    CHECK(m.device.sm_count == 80);
    CHECK(m.date.empty());  // timestamps from 1000 us: not Unix-epoch times
    CHECK(m.source == t.file + " rank 0 step 1");
  }
}

TEST_CASE("trace measurements: rank and step selection", "[trace_measurements]") {
  const KinetoTrace t = load("kineto_two_steps.json");
  const auto all = trace_measurements(t, 0, nullptr, {});
  // Step 1: linear (GEMM 16x256x13, 30 us), D2H 64 B (2 us); step 2: H2D 832 B (6 us).
  // relu_kernel and mul_kernel are not at::native kernels: unrecognized, not written.
  REQUIRE(all.size() == 3);
  TraceSelection two;
  two.steps = parse_ranges("2", "--steps");
  const auto s2 = trace_measurements(t, 0, nullptr, two);
  REQUIRE(s2.size() == 1);
  CHECK(family_of(s2[0]) == "memcpy.h2d");
  CHECK(std::get<MemcpyDesc>(s2[0].kernel).bytes == 832);
  CHECK(s2[0].timing.median == Approx(6 * us));
  CHECK(s2[0].source == t.file + " rank 0 step 2");
  TraceSelection one;
  one.steps = parse_ranges("1", "--steps");
  const auto s1 = trace_measurements(t, 0, nullptr, one);
  REQUIRE(s1.size() == 2);
  CHECK(family_of(s1[0]) == "gemm.fp32");
  const auto g = std::get<GemmDesc>(s1[0].kernel);
  CHECK((g.m == 16 && g.n == 256 && g.k == 13));
  CHECK(s1[0].timing.median == Approx(30 * us));
  CHECK(family_of(s1[1]) == "memcpy.d2h");
  CHECK(std::get<MemcpyDesc>(s1[1].kernel).bytes == 64);
  CHECK(s1[1].timing.median == Approx(2 * us));
  TraceSelection other_rank;
  other_rank.ranks = parse_ranges("1-7", "--ranks");
  CHECK(trace_measurements(t, 0, nullptr, other_rank).empty());
  CHECK(trace_measurements(t, 3, nullptr, other_rank).size() == 3);
}

TEST_CASE("trace measurements round-trip through the JSON-lines format", "[trace_measurements][measurement]") {
  const KinetoTrace t = load("kineto_shapes.json");
  const auto ms = trace_measurements(t, 0, nullptr, {});
  const auto path = std::filesystem::temp_directory_path() / "perfcast_trace_measurements_test.jsonl";
  {
    std::ofstream f(path);
    for (const auto& m : ms) f << measurement_to_jsonl(m);
  }
  const auto back = read_measurements(path);
  std::filesystem::remove(path);
  REQUIRE(back.size() == ms.size());
  for (std::size_t i = 0; i < ms.size(); ++i) {
    CHECK(back[i].kernel == ms[i].kernel);
    CHECK(back[i].timing.timer == "kineto");
    CHECK(back[i].timing.median == Approx(ms[i].timing.median));
    CHECK(back[i].device.name == ms[i].device.name);
    CHECK(back[i].device.sm_count == 80);
    CHECK(back[i].source == ms[i].source);
    CHECK(back[i].kernel_name == ms[i].kernel_name);
  }
  // A line without "source" (our own microbenchmarks) still reads, with source "".
  Measurement own = ms[0];
  own.source.clear();
  own.timing.timer = "cupti";
  CHECK(measurement_to_jsonl(own).find("\"source\"") == std::string::npos);
}

TEST_CASE("selection ranges and trace dates", "[trace_measurements]") {
  const auto r = parse_ranges("1009,1011-1012", "--steps");
  REQUIRE(r.size() == 2);
  CHECK(r[0] == std::pair<std::int64_t, std::int64_t>{1009, 1009});
  CHECK(r[1] == std::pair<std::int64_t, std::int64_t>{1011, 1012});
  TraceSelection s;
  s.steps = r;
  CHECK(s.has_step(1009));
  CHECK_FALSE(s.has_step(1010));
  CHECK(s.has_step(1012));
  CHECK(s.has_rank(5));  // no rank list: all
  CHECK(s.describe() == "all ranks, steps 1009,1011-1012");
  for (const char* bad : {"", "3-1", "a", "-1", "1,,2", "0-"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_ranges(bad, "--ranks"), ConfigError);
  }
  // The HTA trace's first timestamp: 1661203462598738 us after the Unix epoch.
  CHECK(kineto_epoch_date(1661203462598738.0) == "2022-08-22T21:24:22Z");
  CHECK(kineto_epoch_date(1000.0).empty());
}

TEST_CASE("kernel fit from trace-like data: efficiencies bounded by the peak, provenance kept", "[trace_measurements][calibration]") {
  const SystemSpec v100 = load_system(kV100);
  // 40 H2D copies that ran 2x faster than the PCIe peak allows (as the few-KiB copies of
  // the traces seem to): time = 1.5 us + bytes / (2 x 15.75 GB/s). An unbounded fit says
  // e = 2; the bounded one stops at e = 1 and lowers the fixed time instead.
  std::vector<Measurement> ms;
  for (int i = 1; i <= 40; ++i) {
    Measurement m;
    const double bytes = 1024.0 * i;
    m.kernel = MemcpyDesc{bytes, CopyKind::kHostToDevice};
    m.timing.timer = "kineto";
    m.timing.repetitions = 1;
    m.timing.median = 1.5 * us + bytes / (2 * v100.gpu.pcie_bandwidth);
    m.device.name = v100.gpu.name;
    m.date = i <= 20 ? "2023-09-07T23:10:01Z" : "2023-09-06T10:00:00Z";
    m.source = i % 2 ? "a.json rank 0 step 10" : "a.json rank 1 step 10";
    ms.push_back(m);
  }
  KernelCalibration cal = fit_kernel_calibration(ms, v100.gpu);
  cal.note = "fit on ranks 0-1";
  const FamilyFit* f = cal.find("memcpy.h2d");
  REQUIRE(f);
  CHECK(f->memory_efficiency == Approx(1.0));
  CHECK(f->overhead > 0);
  CHECK(f->overhead < 1.5 * us);
  // Predictions: the fixed time plus the bytes at the peak, never faster than the peak.
  for (const auto& m : ms) {
    const double bytes = std::get<MemcpyDesc>(m.kernel).bytes;
    const double t = predict_with_calibration(m.kernel, v100.gpu, &cal).time;
    CHECK(t == Approx(f->overhead + bytes / v100.gpu.pcie_bandwidth));
    CHECK(t >= bytes / v100.gpu.pcie_bandwidth);
  }
  // A 1 GiB copy is predicted at the PCIe peak, not at twice it.
  const double gib = 1024.0 * 1024 * 1024;
  CHECK(predict_with_calibration(MemcpyDesc{gib, CopyKind::kHostToDevice}, v100.gpu, &cal).time >=
        gib / v100.gpu.pcie_bandwidth);
  REQUIRE(cal.sources.size() == 2);
  CHECK(cal.sources[0] == "a.json rank 0 step 10");
  REQUIRE(cal.measured_dates.size() == 2);
  CHECK(cal.measured_dates[0] == "2023-09-06T10:00:00Z");  // sorted
  JsonDocument doc;
  doc.root = nlohmann::json::parse(kernel_calibration_to_json(cal));
  doc.file = "<test>";
  const KernelCalibration back = parse_kernel_calibration(doc);
  CHECK(back.sources == cal.sources);
  CHECK(back.measured_dates == cal.measured_dates);
  CHECK(back.note == "fit on ranks 0-1");
  CHECK(back.find("memcpy.h2d")->overhead == Approx(f->overhead).epsilon(1e-4));
}

TEST_CASE("replay --kernels predicted applies a kernel calibration; selection restricts the family errors",
          "[trace_measurements][replay]") {
  const SystemSpec v100 = load_system(kV100);
  const std::vector<KinetoTrace> traces = {load("kineto_shapes.json")};
  ReplayOptions o;
  o.kernels = ReplayKernels::kPredicted;
  o.collectives = ReplayCollectives::kModel;  // one traced rank of 8: predict the all-reduce anyway
  o.system = &v100;
  const ReplayResult spec = replay_traces(traces, o);
  // Elementwise calibration: 7 us + bytes / 900 GB/s. The relu moves 4096 x 8 B.
  KernelCalibration cal;
  cal.gpu = v100.gpu.name;
  FamilyFit f;
  f.family = "elementwise";
  f.memory_efficiency = 1;
  f.overhead = 7 * us;
  cal.fits.push_back(f);
  o.calibration = &cal;
  const ReplayResult calibrated = replay_traces(traces, o);
  auto family = [](const ReplayResult& r, const std::string& name) -> const FamilyError* {
    for (const auto& e : r.families)
      if (e.name == name) return &e;
    return nullptr;
  };
  REQUIRE(family(calibrated, "elementwise"));
  CHECK(family(calibrated, "elementwise")->predicted == Approx(7 * us + 4096 * 8 / 900e9));
  CHECK(family(calibrated, "elementwise")->measured == Approx(3 * us));
  // Families the calibration does not cover stay spec-derived.
  REQUIRE(family(spec, "gemm"));
  CHECK(family(calibrated, "gemm")->predicted == Approx(family(spec, "gemm")->predicted));
  // Only rank 1 selected: the trace's rank 0 ops drop out of the family errors; the
  // collective (selected by step) stays.
  o.evaluate.ranks = parse_ranges("1", "--ranks");
  const ReplayResult none = replay_traces(traces, o);
  CHECK_FALSE(family(none, "elementwise"));
  CHECK(family(none, "collective"));
  CHECK(none.selected_steps == 0);
  o.evaluate.ranks = parse_ranges("0", "--ranks");
  const ReplayResult rank0 = replay_traces(traces, o);
  CHECK(rank0.selected_steps == 1);
  CHECK(rank0.selected_error() == Approx(rank0.ranks[0].error()));
}

}  // namespace perfcast_test_model_trace_measurements_test
