// The sharded (multi-rank) CPU DLRM step (validation/dlrm_sharded_reference.hpp) equals the
// single-process step (dlrm_train_step) on the global batch: bit for bit on one rank, and
// to fp32 re-association error on 2 and 4 ranks with table_wise, column_wise, row_wise and
// data_parallel tables; plus the known difference of column_wise tables under row-wise
// Adagrad.
//
// Tolerance (kTol = 1e-5, absolute on values below ~1 and relative above): the sharded step
// computes every sample's values with the same operators on the same inputs; only sums that
// cross ranks are re-associated in fp32 (MLP gradient all-reduce, row-wise partial sums,
// data-parallel gradient all-reduce), each off by a few ulps (~1e-7 relative) of values
// below 1, then scaled by a learning rate <= 0.1 (Adam: lr 1e-3 times a bounded ratio). The
// differences measured after 2 steps are ~1e-8 or below, so 1e-5 leaves a wide margin while
// an operator or layout bug (a wrong column, row, rank or denominator) moves parameters by
// ~1e-3 and fails.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "plan_builders.hpp"

#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "profiler/embedding_bag_reference.hpp"
#include "validation/batch_generator.hpp"
#include "validation/dlrm_reference.hpp"
#include "validation/dlrm_sharded_reference.hpp"
#include "validation/multi_gpu_layout.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_validation_dlrm_sharded_reference_test {

using namespace perfcast;
using namespace perfcast::validation;

namespace {

using test::shard;

constexpr double kTol = 1e-5;

struct TableDef {
  const char* name;
  std::int64_t rows, dim;
};

/// Global batch 16; bottom 5-8-d; top 12-1; pooling 3 (uniform rows).
DlrmSpec workload(Interaction inter, const std::vector<TableDef>& tables, std::int64_t d) {
  DlrmSpec w;
  w.name = "sharded";
  w.file = "sharded.json";
  w.batch_size = 16;
  w.bottom_mlp = {5, 8, d};
  w.top_mlp = {12, 1};
  w.interaction = inter;
  for (const auto& t : tables) {
    EmbeddingTableSpec s;
    s.name = t.name;
    s.rows = t.rows;
    s.dim = t.dim;
    s.pooling = 3;
    w.tables.push_back(s);
  }
  return w;
}

/// Five tables of dims 4-8, concatenated (cat) so the dims may differ.
DlrmSpec mixed_workload() {
  return workload(Interaction::kCat, {{"A", 120, 8}, {"B", 60, 6}, {"C", 200, 4}, {"D", 40, 8}, {"E", 20, 4}}, 6);
}

TableSharding table_wise(const EmbeddingTableSpec& t, int rank) {
  return {ShardingType::kTableWise, {rank}, {shard(0, t.rows, 0, t.dim, rank)}};
}
/// Column blocks {col_offset, cols, rank}.
TableSharding column_wise(const EmbeddingTableSpec& t, const std::vector<std::array<std::int64_t, 3>>& blocks) {
  TableSharding s{ShardingType::kColumnWise, {}, {}};
  for (const auto& b : blocks) {
    s.ranks.push_back(static_cast<int>(b[2]));
    s.shards.push_back(shard(0, t.rows, b[0], b[1], static_cast<int>(b[2])));
  }
  return s;
}
/// Row ranges starting at `starts` (one per rank, rank k gets range k).
TableSharding row_wise(const EmbeddingTableSpec& t, const std::vector<std::int64_t>& starts) {
  TableSharding s{ShardingType::kRowWise, {}, {}};
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const std::int64_t end = k + 1 < starts.size() ? starts[k + 1] : t.rows;
    s.ranks.push_back(static_cast<int>(k));
    s.shards.push_back(shard(starts[k], end - starts[k], 0, t.dim, static_cast<int>(k)));
  }
  return s;
}
TableSharding data_parallel(const EmbeddingTableSpec& t, int world) {
  TableSharding s{ShardingType::kDataParallel, {}, {}};
  for (int r = 0; r < world; ++r) {
    s.ranks.push_back(r);
    s.shards.push_back(shard(0, t.rows, 0, t.dim, r));
  }
  return s;
}

/// Two ranks: A column_wise (cols 0-3 on rank 1, 4-7 on rank 0), B table_wise on 1, C row_wise
/// (rows 0-79 on 0, 80-199 on 1), D data_parallel, E table_wise on 0.
ShardingPlan mixed_plan_2(const DlrmSpec& w) {
  ShardingPlan p;
  p.source = "plan2.json";
  p.tables = {column_wise(w.tables[0], {{{0, 4, 1}, {4, 4, 0}}}), table_wise(w.tables[1], 1),
              row_wise(w.tables[2], {0, 80}), data_parallel(w.tables[3], 2), table_wise(w.tables[4], 0)};
  return p;
}

/// Four ranks: A column_wise in 2-column blocks on ranks 3, 1, 0, 2; B table_wise on 2; C
/// row_wise in uneven ranges; D data_parallel; E column_wise (first half of the columns on 3,
/// second half on 0).
ShardingPlan mixed_plan_4(const DlrmSpec& w) {
  ShardingPlan p;
  p.source = "plan4.json";
  p.tables = {column_wise(w.tables[0], {{{0, 2, 3}, {2, 2, 1}, {4, 2, 0}, {6, 2, 2}}}), table_wise(w.tables[1], 2),
              row_wise(w.tables[2], {0, 50, 120, 130}), data_parallel(w.tables[3], 4),
              column_wise(w.tables[4], {{{0, w.tables[4].dim / 2, 3}, {w.tables[4].dim / 2, w.tables[4].dim / 2, 0}}})};
  return p;
}

/// A plan without column_wise tables (for row-wise Adagrad, which differs on column_wise).
ShardingPlan adagrad_plan(const DlrmSpec& w, int world) {
  ShardingPlan p;
  p.source = "plan_adagrad.json";
  std::vector<std::int64_t> c_starts, b_starts;
  for (int r = 0; r < world; ++r) {
    c_starts.push_back(r * 200 / world + (r > 0 ? 3 : 0));  // uneven ranges
    b_starts.push_back(r * 60 / world);
  }
  p.tables = {table_wise(w.tables[0], world - 1), row_wise(w.tables[1], b_starts), row_wise(w.tables[2], c_starts),
              data_parallel(w.tables[3], world), table_wise(w.tables[4], 0)};
  return p;
}

/// Largest |a - b| / max(1, |b|) over every MLP parameter.
double mlp_diff(const DlrmModel& a, const DlrmModel& b) {
  double worst = 0;
  const auto cmp = [&](const std::vector<float>& x, const std::vector<float>& y) {
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double d = std::fabs(static_cast<double>(x[i]) - y[i]) / std::max(1.0, std::fabs(static_cast<double>(y[i])));
      worst = std::max(worst, d);
    }
  };
  for (std::size_t l = 0; l < a.bottom.size(); ++l) {
    cmp(a.bottom[l].weight, b.bottom[l].weight);
    cmp(a.bottom[l].bias, b.bottom[l].bias);
  }
  for (std::size_t l = 0; l < a.top.size(); ++l) {
    cmp(a.top[l].weight, b.top[l].weight);
    cmp(a.top[l].bias, b.top[l].bias);
  }
  return worst;
}

/// Largest |a - b| / max(1, |b|) over every embedding weight.
double embedding_diff(const DlrmModel& a, const DlrmModel& b) {
  const auto x = a.embeddings.to_floats(), y = b.embeddings.to_floats();
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]) / std::max(1.0, std::fabs(static_cast<double>(y[i]))));
  }
  return worst;
}

/// Largest |a - b| over the embedding weights (how far a step moved them).
double embedding_moved(const DlrmModel& a, const DlrmModel& b) { return embedding_diff(a, b); }

/// Every rank holds bitwise the same MLPs (and Adam state) and the same data_parallel copies.
void check_ranks_identical(const ShardedDlrmState& st) {
  for (std::size_t r = 1; r < st.ranks.size(); ++r) {
    INFO("rank " << r);
    for (std::size_t l = 0; l < st.ranks[0].bottom.size(); ++l) {
      CHECK(st.ranks[r].bottom[l].weight == st.ranks[0].bottom[l].weight);
      CHECK(st.ranks[r].bottom[l].bias == st.ranks[0].bottom[l].bias);
    }
    for (std::size_t l = 0; l < st.ranks[0].top.size(); ++l) {
      CHECK(st.ranks[r].top[l].weight == st.ranks[0].top[l].weight);
      CHECK(st.ranks[r].top[l].bias == st.ranks[0].top[l].bias);
    }
    for (std::size_t l = 0; l < st.ranks[0].adam_m.size(); ++l) {
      CHECK(st.ranks[r].adam_m[l].weight == st.ranks[0].adam_m[l].weight);
      CHECK(st.ranks[r].adam_v[l].weight == st.ranks[0].adam_v[l].weight);
    }
    CHECK(st.ranks[r].data_parallel.weights.to_floats() == st.ranks[0].data_parallel.weights.to_floats());
    CHECK(st.ranks[r].data_parallel.rowwise_state == st.ranks[0].data_parallel.rowwise_state);
  }
}

struct Run {
  DlrmModel single, sharded, initial;
  std::vector<double> single_loss, sharded_loss;
  ShardedDlrmState state;
};

/// `steps` steps of the single-process model and of its sharding over `world` ranks, on the
/// same generated global batches.
Run run_both(const DlrmSpec& w, const ShardingPlan& plan, int world, int steps, DenseOptimizer dopt,
             EmbeddingOptimizer eopt, std::uint64_t seed = 11) {
  DlrmSpec spec = w;
  spec.dense_optimizer = dopt;
  spec.embedding_optimizer = eopt;
  DlrmConfig c = dlrm_config_from_spec(spec, spec.batch_size);
  c.hyper.dense_lr = 0.1f;
  c.hyper.embedding_lr = 0.1f;
  c.hyper.adam_lr = 1e-3f;
  Run run;
  run.single = init_dlrm_model(c, seed);
  run.initial = run.single;
  const MultiGpuLayout L = multi_gpu_layout(spec, plan, world);
  run.state = init_sharded_dlrm(run.single, L);
  for (int s = 0; s < steps; ++s) {
    const DlrmBatch batch = generate_dlrm_batch(c, table_traffic(spec), seed, static_cast<std::uint64_t>(s));
    run.single_loss.push_back(dlrm_train_step(run.single, batch));
    run.sharded_loss.push_back(sharded_train_step(run.state, L, spec, batch));
  }
  run.sharded = gather_sharded(run.state, L);
  return run;
}

void check_equal(const Run& run, double tol) {
  REQUIRE(run.single_loss.size() == run.sharded_loss.size());
  for (std::size_t s = 0; s < run.single_loss.size(); ++s) {
    INFO("step " << s);
    CHECK(run.sharded_loss[s] == Approx(run.single_loss[s]).epsilon(1e-6));
  }
  CHECK(mlp_diff(run.sharded, run.single) <= tol);
  CHECK(embedding_diff(run.sharded, run.single) <= tol);
  // Not vacuous: the steps moved the embeddings by far more than the tolerance.
  CHECK(embedding_moved(run.single, run.initial) > 100 * tol);
  CHECK(mlp_diff(run.single, run.initial) > 100 * tol);
  check_ranks_identical(run.state);
}

/// Spacing of fp16 values around |x| (2^-24 below the normal range 2^-14).
double fp16_ulp(double x) {
  x = std::fabs(x);
  if (x < std::ldexp(1.0, -14)) return std::ldexp(1.0, -24);
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(x))) - 10);
}

}  // namespace

TEST_CASE("sharded DLRM: one rank, all table_wise, is bitwise the single-process step", "[validation][sharded]") {
  for (auto inter : {Interaction::kDot, Interaction::kCat}) {
    for (auto [dopt, eopt] : {std::pair{DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd},
                              std::pair{DenseOptimizer::kAdam, EmbeddingOptimizer::kRowwiseAdagrad}}) {
      const DlrmSpec w = workload(inter, {{"A", 50, 4}, {"B", 20, 4}, {"C", 120, 4}}, 4);
      const Run run = run_both(w, default_plan(w, 1), 1, 2, dopt, eopt);
      CHECK(run.sharded_loss == run.single_loss);
      CHECK(mlp_diff(run.sharded, run.single) == 0.0);
      CHECK(run.sharded.embeddings.to_floats() == run.single.embeddings.to_floats());
      CHECK(run.sharded.rowwise_state == run.single.rowwise_state);
      CHECK(run.sharded.adam_step == run.single.adam_step);
      CHECK(embedding_moved(run.single, run.initial) > 1e-3);
    }
  }
}

TEST_CASE("sharded DLRM: 2 and 4 ranks, table/column/row-wise and data-parallel, SGD", "[validation][sharded]") {
  const DlrmSpec w = mixed_workload();
  SECTION("2 ranks") {
    const Run run = run_both(w, mixed_plan_2(w), 2, 2, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
    check_equal(run, kTol);
  }
  SECTION("4 ranks") {
    const Run run = run_both(w, mixed_plan_4(w), 4, 2, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
    check_equal(run, kTol);
  }
  SECTION("4 ranks, dot interaction") {
    const DlrmSpec d = workload(Interaction::kDot, {{"A", 120, 8}, {"B", 60, 8}, {"C", 200, 8}, {"D", 40, 8}, {"E", 20, 8}}, 8);
    const Run run = run_both(d, mixed_plan_4(d), 4, 2, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
    check_equal(run, kTol);
  }
}

/// Four ranks with the node-level types of one node: A grid (column blocks 0-3 and 4-7, rows
/// split at 50 over ranks 0 / 1 and at 70 over ranks 3 / 2), B table_row_wise on ranks 1 and 2
/// only, C row_wise on ranks 0 and 3 only (the other ranks add zero partial sums), D
/// table_column_wise (columns 0-4 on rank 3, 5-7 on rank 0), E data_parallel.
ShardingPlan node_types_plan_4(const DlrmSpec& w) {
  ShardingPlan p;
  p.source = "plan_node_types.json";
  TableSharding a{ShardingType::kGrid, {0, 1, 3, 2}, {shard(0, 50, 0, 4, 0), shard(50, 70, 0, 4, 1),
                                                      shard(0, 70, 4, 4, 3), shard(70, 50, 4, 4, 2)}};
  TableSharding b{ShardingType::kTableRowWise, {1, 2}, {shard(0, 25, 0, 6, 1), shard(25, 35, 0, 6, 2)}};
  TableSharding c{ShardingType::kRowWise, {0, 3}, {shard(0, 120, 0, 4, 0), shard(120, 80, 0, 4, 3)}};
  TableSharding d{ShardingType::kTableColumnWise, {3, 0}, {shard(0, 40, 0, 5, 3), shard(0, 40, 5, 3, 0)}};
  p.tables = {a, b, c, d, data_parallel(w.tables[4], 4)};
  return p;
}

TEST_CASE("sharded DLRM: grid, table_row_wise and row_wise on some ranks, table_column_wise", "[validation][sharded]") {
  const DlrmSpec w = mixed_workload();
  const ShardingPlan p = node_types_plan_4(w);
  const MultiGpuLayout L = multi_gpu_layout(w, p, 4);
  CHECK(L.row_wise_dims == 4 + 4 + 6 + 4);  // A's two blocks, B, C
  SECTION("SGD") {
    const Run run = run_both(w, p, 4, 2, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
    check_equal(run, kTol);
    CHECK(embedding_moved(run.sharded, run.initial) > 1e-3);
  }
  SECTION("Adam, row-wise Adagrad: whole rows on one rank (no grid), accumulators equal") {
    ShardingPlan q = p;
    q.tables[0] = {ShardingType::kTableRowWise, {0, 1}, {shard(0, 50, 0, 8, 0), shard(50, 70, 0, 8, 1)}};
    q.tables[3] = {ShardingType::kTableWise, {3}, {shard(0, 40, 0, 8, 3)}};
    const Run run = run_both(w, q, 4, 2, DenseOptimizer::kAdam, EmbeddingOptimizer::kRowwiseAdagrad);
    check_equal(run, kTol);
    REQUIRE(run.sharded.rowwise_state.size() == run.single.rowwise_state.size());
    for (std::size_t i = 0; i < run.single.rowwise_state.size(); ++i) {
      CHECK(run.sharded.rowwise_state[i] == Approx(run.single.rowwise_state[i]).epsilon(1e-5).margin(1e-12));
    }
  }
}

TEST_CASE("sharded DLRM: Adam MLPs and row-wise Adagrad embeddings", "[validation][sharded]") {
  const DlrmSpec w = mixed_workload();
  for (int world : {2, 4}) {
    INFO("world " << world);
    const Run run = run_both(w, adagrad_plan(w, world), world, 2, DenseOptimizer::kAdam,
                             EmbeddingOptimizer::kRowwiseAdagrad);
    check_equal(run, kTol);
    CHECK(run.sharded.adam_step == 2);
    // The accumulators agree too (every table here keeps whole rows on one rank).
    REQUIRE(run.sharded.rowwise_state.size() == run.single.rowwise_state.size());
    for (std::size_t i = 0; i < run.single.rowwise_state.size(); ++i) {
      CHECK(run.sharded.rowwise_state[i] == Approx(run.single.rowwise_state[i]).epsilon(1e-5).margin(1e-12));
    }
  }
}

TEST_CASE("sharded DLRM: fp16 embedding weights agree within one fp16 rounding", "[validation][sharded]") {
  DlrmSpec w = mixed_workload();
  w.embedding_dtype = DType::kFp16;
  const Run run = run_both(w, mixed_plan_4(w), 4, 2, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
  REQUIRE(run.sharded.embeddings.precision() == profiler::WeightPrecision::kFp16);
  const auto x = run.sharded.embeddings.to_floats(), y = run.single.embeddings.to_floats();
  REQUIRE(x.size() == y.size());
  std::size_t off_by_ulp = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
    CHECK(d <= fp16_ulp(std::max(std::fabs(x[i]), std::fabs(y[i]))));
    off_by_ulp += d > 0 ? 1 : 0;
  }
  // A weight stored in fp16 is either equal or one rounding apart; the MLPs (fp32) stay
  // within the fp32 tolerance scaled by the fp16 spacing of the embeddings they read.
  CHECK(mlp_diff(run.sharded, run.single) <= 1e-4);
  CHECK(run.sharded_loss[1] == Approx(run.single_loss[1]).epsilon(1e-4));
  INFO("fp16 weights one ulp apart: " << off_by_ulp << " of " << x.size());
  check_ranks_identical(run.state);
}

TEST_CASE("sharded DLRM: column_wise with row-wise Adagrad keeps one accumulator per shard row", "[validation][sharded]") {
  // Known, intended difference (TorchRec's column-wise sharding): each column shard's row keeps
  // G_k += mean over ITS columns of g^2, so the step lr / (sqrt(G_k) + eps) differs per shard.
  const DlrmSpec w = mixed_workload();
  const ShardingPlan plan = mixed_plan_2(w);  // table A: columns 0-3 on rank 1, 4-7 on rank 0
  SECTION("with SGD the column-wise plan is equivalent") {
    const Run run = run_both(w, plan, 2, 2, DenseOptimizer::kSgd, EmbeddingOptimizer::kSgd);
    check_equal(run, kTol);
  }
  SECTION("with row-wise Adagrad table A differs, by the per-shard accumulator") {
    DlrmSpec spec = w;
    spec.embedding_optimizer = EmbeddingOptimizer::kRowwiseAdagrad;
    const Run run = run_both(w, plan, 2, 1, DenseOptimizer::kSgd, EmbeddingOptimizer::kRowwiseAdagrad);
    // Step 1 reads identical weights, so the gradients are the same: recompute them with the
    // single-process reference and predict table A's sharded update by hand.
    const DlrmConfig c = run.initial.config;
    const DlrmBatch batch = generate_dlrm_batch(c, table_traffic(spec), 11, 0);
    const DlrmGradients g = dlrm_gradients(run.initial, batch);
    const auto& A = run.initial.layout.tables[0];
    const float lr = c.hyper.embedding_lr, eps = c.hyper.adagrad_eps;
    double worst_vs_hand = 0, worst_vs_single = 0;
    int touched = 0;
    for (std::int64_t row = 0; row < A.rows; ++row) {
      const auto gr = [&](std::int64_t col) { return g.embedding[static_cast<std::size_t>(A.weight_offset + row * A.dim + col)]; };
      double full_sq = 0;
      for (std::int64_t col = 0; col < A.dim; ++col) full_sq += static_cast<double>(gr(col)) * gr(col);
      if (full_sq == 0) continue;
      ++touched;
      for (std::int64_t block : {0, 4}) {  // the two 4-column shards
        double sq = 0;
        for (std::int64_t col = block; col < block + 4; ++col) sq += static_cast<double>(gr(col)) * gr(col);
        const double G = sq / 4;
        for (std::int64_t col = block; col < block + 4; ++col) {
          const std::int64_t e = A.weight_offset + row * A.dim + col;
          const double expect = run.initial.embeddings.load(e) - lr / (std::sqrt(G) + eps) * gr(col);
          worst_vs_hand = std::max(worst_vs_hand, std::fabs(run.sharded.embeddings.load(e) - expect));
          worst_vs_single = std::max(worst_vs_single,
                                     std::fabs(static_cast<double>(run.sharded.embeddings.load(e)) - run.single.embeddings.load(e)));
        }
      }
      // The gathered accumulator, sum_k cols_k G_k / dim, is the unsharded one after step 1.
      CHECK(run.sharded.rowwise_state[static_cast<std::size_t>(A.row_offset + row)] ==
            Approx(run.single.rowwise_state[static_cast<std::size_t>(A.row_offset + row)]).epsilon(1e-5));
    }
    CHECK(touched > 10);
    CHECK(worst_vs_hand <= 1e-6);
    CHECK(worst_vs_single > 1e-3);  // the known effect: ~lr-sized differences
    // The other tables (table-, row-wise, data-parallel) and, after one step, the MLPs agree.
    CHECK(mlp_diff(run.sharded, run.single) <= kTol);
    const auto x = run.sharded.embeddings.to_floats(), y = run.single.embeddings.to_floats();
    for (std::size_t i = static_cast<std::size_t>(A.rows * A.dim); i < x.size(); ++i) {
      if (std::fabs(x[i] - y[i]) > kTol) FAIL("element " << i << " outside table A differs");
    }
  }
}

TEST_CASE("sharded DLRM: per-rank trace and mismatches", "[validation][sharded]") {
  const DlrmSpec w = mixed_workload();
  const ShardingPlan plan = mixed_plan_2(w);
  const DlrmConfig c = dlrm_config_from_spec(w, w.batch_size);
  const DlrmModel m = init_dlrm_model(c, 3);
  const MultiGpuLayout L = multi_gpu_layout(w, plan, 2);
  ShardedDlrmState st = init_sharded_dlrm(m, L);
  // Rank 1 holds A's columns 0-3 (pooled group: A cols 0-3, B), C rows 80-199, a copy of D.
  REQUIRE(st.ranks.size() == 2);
  CHECK(st.ranks[1].pooled.layout.total_dim == 4 + 6);
  CHECK(st.ranks[1].row_wise.layout.tables.at(0).rows == 120);
  CHECK(st.ranks[1].data_parallel.layout.batch_size == 8);
  // Slicing: rank 0's first pooled shard is A's columns 4-7: its (row 2, col 1) is A's (2, 5).
  CHECK(st.ranks[0].pooled.weights.load(2 * 4 + 1) == m.embeddings.load(2 * 8 + 5));
  // Rank 1's row-wise shard row 0 is C's row 80.
  const auto& C = m.layout.tables[2];
  CHECK(st.ranks[1].row_wise.weights.load(0) == m.embeddings.load(C.weight_offset + 80 * 4));

  const DlrmBatch batch = generate_dlrm_batch(c, table_traffic(w), 3, 0);
  ShardedStepTrace trace;
  const double loss = sharded_train_step(st, L, w, batch, &trace);
  // The per-rank pooled rows are the single-process pooled rows of the rank's samples
  // (equal up to the fp32 order of C's row-wise partial sums).
  const DlrmGradients g = dlrm_gradients(m, batch);
  const std::vector<float> pooled =
      profiler::embedding_bag_forward_reference(m.layout, m.embeddings, batch.indices, batch.offsets, profiler::PoolingMode::kSum);
  const std::int64_t td = m.layout.total_dim;
  REQUIRE(trace.pooled.size() == 2);
  for (std::size_t r = 0; r < 2; ++r) {
    REQUIRE(trace.pooled[r].size() == static_cast<std::size_t>(8 * td));
    for (std::int64_t k = 0; k < 8 * td; ++k) {
      CHECK(trace.pooled[r][static_cast<std::size_t>(k)] ==
            Approx(pooled[static_cast<std::size_t>(static_cast<std::int64_t>(r) * 8 * td + k)]).margin(1e-6));
    }
  }
  REQUIRE(trace.loss.size() == 2);
  CHECK(loss == Approx((trace.loss[0] + trace.loss[1]) / 2).epsilon(1e-12));
  CHECK(loss == Approx(g.loss).epsilon(1e-6));
  for (std::size_t r = 0; r < 2; ++r) {
    for (std::int64_t s = 0; s < 8; ++s) {
      CHECK(trace.logits[r][static_cast<std::size_t>(s)] ==
            Approx(g.logits[static_cast<std::size_t>(static_cast<std::int64_t>(r) * 8 + s)]).epsilon(1e-5));
    }
  }

  DlrmConfig other = c;
  other.batch_size = 8;
  CHECK_THROWS_AS(init_sharded_dlrm(init_dlrm_model(other, 3), L), std::invalid_argument);
  CHECK_THROWS_AS(init_sharded_dlrm(init_dlrm_model(c, 3, /*draw_embeddings=*/false), L), std::invalid_argument);
  // Shards that do not tile their table: multi_gpu_layout names the table (as parse_plan does
  // for plan files), and overlapping shards too.
  ShardingPlan gap = plan;
  gap.tables[0] = column_wise(w.tables[0], {{{0, 4, 1}, {4, 3, 0}}});  // column 7 of A on no rank
  CHECK_THROWS_WITH(multi_gpu_layout(w, gap, 2), Catch::Contains("table 'A': the shards cover 840 of its 120 x 8"));
  ShardingPlan overlap = plan;
  overlap.tables[0] = column_wise(w.tables[0], {{{0, 4, 1}, {3, 6, 0}}});  // columns 3-8 of an 8-wide table
  CHECK_THROWS_WITH(multi_gpu_layout(w, overlap, 2), Catch::Contains("table 'A': shard rows 0+120 cols 3+6 is outside"));
  overlap.tables[0] = column_wise(w.tables[0], {{{0, 4, 1}, {3, 4, 0}}});  // column 3 twice, column 7 on no rank
  CHECK_THROWS_WITH(multi_gpu_layout(w, overlap, 2), Catch::Contains("table 'A': shards 0 and 1 overlap"));
  DlrmBatch bad = batch;
  bad.labels.pop_back();
  CHECK_THROWS_AS(sharded_train_step(st, L, w, bad), std::invalid_argument);
}

}  // namespace perfcast_test_validation_dlrm_sharded_reference_test
