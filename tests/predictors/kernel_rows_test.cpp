// Measured rows for `perfcast kernels` (predictors/kernel_rows.hpp): the public tables as
// kernel descriptors, what cannot be expressed, and bad rows.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <catch2/catch.hpp>

#include "core/json_reader.hpp"
#include "predictors/kernel_rows.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_predictors_kernel_rows_test {

using namespace perfcast;

namespace {

std::filesystem::path data(const char* file) {
  return std::filesystem::path(PERFCAST_SOURCE_DIR) / "data/public-measurements" / file;
}

std::filesystem::path write(const char* name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p;
}

const char* kGemmHeader =
    "row_id,source_id,source_url,source_date,gpu,gpu_class,software,implementation,op,dtype,layout,M,N,K,batch_or_groups,time_us,"
    "tflops,gbps,derived_fields,measurement,transcription,notes\n";

}  // namespace

TEST_CASE("GPU classes of device names", "[kernel_rows]") {
  CHECK(gpu_class_of("NVIDIA H100 80GB HBM3") == "H100 SXM");
  CHECK(gpu_class_of("NVIDIA H100 SXM5 80GB") == "H100 SXM");
  CHECK(gpu_class_of("NVIDIA H100 PCIe 80GB") == "H100 PCIe");
  CHECK(gpu_class_of("NVIDIA H100 NVL") == "H100 NVL");
  CHECK(gpu_class_of("NVIDIA H200 SXM 141GB") == "H200");
  CHECK(gpu_class_of("NVIDIA GH200 96GB HBM3") == "GH200");
  CHECK(gpu_class_of("H800 SXM5") == "H800");
  CHECK(gpu_class_of("NVIDIA A100-SXM4-80GB") == "A100 SXM 80GB");
  CHECK(gpu_class_of("NVIDIA A100 SXM4 80GB") == "A100 SXM 80GB");
  CHECK(gpu_class_of("NVIDIA A100-PG509-200") == "A100 SXM 40GB");
  CHECK(gpu_class_of("Tesla V100-SXM2-32GB") == "V100 SXM");
  CHECK(gpu_class_of("NVIDIA L4") == "NVIDIA L4");
}

TEST_CASE("GEMM rows: shape, type, library and caveats", "[kernel_rows]") {
  const auto p = write("perfcast_rows_gemm.csv",
                       std::string(kGemmHeader) +
                           "g1,dg,u,d,H800 SXM5,H800,s,\"DeepGEMM FP8 GEMM (JIT, sm90a)\",grouped_gemm_masked,\"fp8_e4m3 in (1x128 act / "
                           "128x128 weight block scales), bf16 out\",l,256,4096,7168,4,64.52,932,2064,f,README table,script,n\n"
                           "g2,ta,u,d,H100 (variant not stated),H100 (variant not stated),s,torch.nn.functional.linear (cuBLAS) fp16,gemm,"
                           "fp16,l,1,8192,8192,1,83.744,1.6,,f,triton.testing.do_bench median,script,n\n"
                           "g3,mf,u,d,H100 SXM,H100 SXM,s,torch.mm,gemm,bf16,l,2048,2048,13312,1,140.6,794.5,,f,mamf-finder; best shape "
                           "of a sweep,hand,n\n"
                           "g4,x,u,d,H100 SXM,H100 SXM,s,torch.mm,gemm,int8,l,2048,2048,2048,1,40,,,f,m,script,n\n"
                           "g5,x,u,d,H100 SXM,H100 SXM,s,cudnn,conv2d,bf16,l,2048,2048,2048,1,40,,,f,m,script,n\n");
  const auto rows = read_kernel_rows(p);
  REQUIRE(rows.size() == 5);
  const auto& g = std::get<GemmDesc>(rows[0].kernels.at(0));
  CHECK((g.m == 256 && g.n == 4096 && g.k == 7168 && g.batch == 4));
  CHECK(g.dtype == DType::kFp8);
  CHECK(g.block_scaled);
  CHECK(g.impl == GemmImpl::kDeepGemm);
  CHECK(rows[0].gpu_class == "H800");
  CHECK(rows[0].measured == Approx(64.52e-6));
  CHECK(rows[0].where == "line 2 (g1)");
  // Variant not stated: predicted as an H100 SXM, at half weight; do_bench: harness overhead.
  CHECK(rows[1].gpu_class == "H100 SXM");
  CHECK(rows[1].weight == Approx(kCaveatWeight));
  CHECK(rows[1].harness_overhead);
  CHECK(std::get<GemmDesc>(rows[1].kernels.at(0)).dtype == DType::kFp16);
  // A sweep's best shape: half weight, and hand transcription noted.
  CHECK(rows[2].weight == Approx(kCaveatWeight));
  CHECK(std::find(rows[2].caveats.begin(), rows[2].caveats.end(), "hand transcribed") != rows[2].caveats.end());
  // int8 has no GEMM model: kept, with the reason.
  CHECK(rows[3].kernels.empty());
  CHECK(rows[3].not_expressible.find("int8") != std::string::npos);
  // A convolution in a GEMM table has M, N and K, but no GEMM stands for it: kept, named.
  CHECK(rows[4].kernels.empty());
  CHECK(rows[4].not_expressible.find("\"conv2d\" is not a GEMM") != std::string::npos);
}

TEST_CASE("bad rows name the file and the row", "[kernel_rows]") {
  const std::string ok = "g1,dg,u,d,H800 SXM5,H800,s,DeepGEMM,gemm,bf16,l,64,64,64,1,9.4,1,1,f,m,script,n\n";
  auto fails_with = [](const std::filesystem::path& p, const std::string& where, const std::string& what) {
    try {
      (void)read_kernel_rows(p);
      FAIL("no error");
    } catch (const ConfigError& e) {
      CHECK(e.file() == p.string());
      CHECK(e.pointer() == where);
      CHECK_THAT(e.message(), Catch::Contains(what));
    }
  };
  fails_with(write("perfcast_rows_bad1.csv", std::string(kGemmHeader) + ok + "g2,dg,u,d,H800,H800,s,x,gemm,bf16,l,64,64,64,1,0,1,1,f,m,s,n\n"),
             "line 3 (g2)", "column time_us: expected a positive number");
  fails_with(write("perfcast_rows_bad2.csv", std::string(kGemmHeader) + ok + "g2,dg,u\n"), "line 3 (g2)", "expected 22 fields, got 3");
  fails_with(write("perfcast_rows_bad3.csv", std::string(kGemmHeader) + "g1,dg,u,d,H800,H800,s,x,gemm,bf16,l,64,-1,64,1,5,1,1,f,m,s,n\n"),
             "line 2 (g1)", "column N: expected a positive number");
  fails_with(write("perfcast_rows_bad4.csv", "a,b\n1,2\n"), "line 1", "not a measurement table");
  fails_with(write("perfcast_rows_bad5.csv", std::string(kGemmHeader) + ",dg,u,d,H800,H800,s,x,gemm,bf16,l,64,64,64,1,5,1,1,f,m,s,n\n"),
             "line 2", "column row_id is empty");
}

TEST_CASE("the public tables: every row read, the inexpressible ones with a reason", "[kernel_rows]") {
  const auto gemm = read_kernel_rows(data("hopper-kernels/gemm.csv"));
  CHECK(gemm.size() == 1096);  // 318, 760 of OpenXLA's sm_90 table and vLLM's rows, 18 of the Azure guide (2026-11-28)
  // The Azure guide's 8192^3 FP8 GEMM on ND H100 v5: 1,290.1 TFLOP/s by superbench's count of
  // M N (2K - 1) operations, 8192 x 8192 x 16383 / 1.2901e15 s = 852.22 us; one event pair
  // around a launch loop, so its source gets a harness intercept; one scale per tensor.
  const auto azure = std::find_if(gemm.begin(), gemm.end(), [](const KernelRow& r) { return r.row_id == "gem-01131"; });
  REQUIRE(azure != gemm.end());
  CHECK(azure->source == "azure_ai_benchmarking_guide");
  CHECK(azure->measured == Approx(852.22e-6).epsilon(1e-5));
  CHECK(azure->harness_overhead);
  const auto& fp8 = std::get<GemmDesc>(azure->kernels.front());
  CHECK(fp8.m == 8192);
  CHECK(fp8.dtype == DType::kFp8);
  CHECK_FALSE(fp8.block_scaled);
  // KernelBench times one eager call between two CUDA events: a harness too; OpenXLA's table
  // records CUPTI kernel durations: not one.
  for (const auto& r : gemm) {
    if (r.source.rfind("kernelbench_", 0) == 0) CHECK(r.harness_overhead);
    if (r.source == "xla_sm90_matmul_perf_table") CHECK_FALSE(r.harness_overhead);
  }
  for (const auto& r : gemm) CHECK(r.kernels.size() == 1);
  // OpenXLA's first sm_90 row: a 256^3 bf16 dot in 4.992 us (2 x 256^3 / 6,721,641,025,641
  // flop/s), an H100 whose variant the table does not state; the library is not recorded, so
  // it is cuBLAS's family. Its f32 dots are TF32 math, batched dots a batch.
  const auto xla = std::find_if(gemm.begin(), gemm.end(), [](const KernelRow& r) { return r.row_id == "gem-00368"; });
  REQUIRE(xla != gemm.end());
  CHECK(xla->source == "xla_sm90_matmul_perf_table");
  CHECK(xla->measured == Approx(4.992e-6));
  CHECK(std::find(xla->caveats.begin(), xla->caveats.end(), "gpu inferred") != xla->caveats.end());
  const auto& g = std::get<GemmDesc>(xla->kernels.front());
  CHECK(g.m == 256);
  CHECK(g.dtype == DType::kBf16);
  CHECK(g.impl == GemmImpl::kCublas);
  std::size_t tf32_batched = 0;
  for (const auto& r : gemm) {
    if (r.source != "xla_sm90_matmul_perf_table") continue;
    const auto& d = std::get<GemmDesc>(r.kernels.front());
    tf32_batched += d.dtype == DType::kTf32 && d.batch > 1;
  }
  CHECK(tf32_batched == 250);  // 125 shapes at batch 2 and at batch 4
  const auto attention = read_kernel_rows(data("hopper-kernels/attention.csv"));
  CHECK(attention.size() == 174);
  std::size_t both = 0;
  for (const auto& r : attention) {
    REQUIRE_FALSE(r.kernels.empty());
    both += r.kernels.size() == 2;
  }
  CHECK(both == 50);  // the fwd+bwd columns: 20 of the first snapshot, 30 of the second
  const auto memory = read_kernel_rows(data("hopper-kernels/memory_bound.csv"));
  CHECK(memory.size() == 1270);
  // The Azure guide's BabelStream copy on ND H100 v5: 2 streams x 1,308,622,848 doubles x 8 B =
  // 20,937,965,568 B at 2.90 TB/s = 7,220.0 us, one kernel, not harness-timed.
  const auto copy = std::find_if(memory.begin(), memory.end(), [](const KernelRow& r) { return r.row_id == "mem-01507"; });
  REQUIRE(copy != memory.end());
  REQUIRE(copy->kernels.size() == 1);
  const auto& stream = std::get<ElementwiseDesc>(copy->kernels.front());
  CHECK(static_cast<double>(stream.elements) * stream.bytes_per_element == Approx(20937965568.0));
  CHECK(copy->measured == Approx(7220.0e-6).epsilon(1e-5));
  CHECK_FALSE(copy->harness_overhead);
  CHECK_FALSE(stream.thread_per_element);  // the guide's BabelStream fork: a grid-stride loop over 8 blocks per SM
  // gpu-benches launches one thread per element (grid = N/blockSize+1): its 344 expressible
  // small-kernel rows and its 12 stream rows; nothing else in the table.
  std::size_t plain = 0;
  for (const auto& r : memory)
    if (!r.kernels.empty() && std::get<ElementwiseDesc>(r.kernels.front()).thread_per_element) {
      ++plain;
      CHECK(r.source.rfind("gpu_benches", 0) == 0);
    }
  CHECK(plain == 356);
  // Liger's cross-entropy forward on 33,554,432 bf16 logits reads them twice (the online
  // softmax's max and sum, then the gradient pass) and writes their gradient in place:
  // 3 x 2 B x 33,554,432 = 201,326,592 B.
  const auto ce = std::find_if(memory.begin(), memory.end(), [](const KernelRow& r) { return r.row_id == "mem-00531"; });
  REQUIRE(ce != memory.end());
  REQUIRE(ce->kernels.size() == 1);
  const auto& logits = std::get<ElementwiseDesc>(ce->kernels.front());
  CHECK(static_cast<double>(logits.elements) * logits.bytes_per_element == Approx(201326592.0));
  std::map<std::string, int> reasons;
  for (const auto& r : memory) {
    CHECK((r.kernels.empty() != r.not_expressible.empty()));
    if (!r.not_expressible.empty()) ++reasons[r.not_expressible.substr(0, 20)];
  }
  CHECK(reasons["per-kernel time of a"] == 290);  // gpu-benches' plain launch streams
  CHECK(reasons["composite eager op: "] > 0);
  // embedding_kernel_times_h100.csv: forward and backward of each row with times.
  const auto emb = read_kernel_rows(data("embedding_kernel_times_h100.csv"));
  std::size_t expressed = 0;
  for (const auto& r : emb) expressed += !r.kernels.empty();
  CHECK(expressed >= 12);  // FBGEMM in HBM and in host memory (UVM), forward and backward
}

}  // namespace perfcast_test_predictors_kernel_rows_test
