// Which shards, rows and columns each rank of a multi-GPU run holds, and the bytes it
// exchanges, for hand-worked 2-rank, 3-table plans (validation/multi_gpu_layout.hpp).
#include <array>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "plan_builders.hpp"

#include "model/graph/dlrm_builder.hpp"
#include "model/graph/sharding_plan.hpp"
#include "model/graph/workload_spec.hpp"
#include "core/json_reader.hpp"
#include "validation/multi_gpu_layout.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_validation_multi_gpu_layout_test {

using namespace perfcast;
using namespace perfcast::validation;

namespace {

using test::shard;

/// batch 8, bottom 4-8-4 (d = 4), tables A (100 x 4), B (60 x 4), C (10 x 4), dot
/// interaction (width 4 + 4*3/2 = 10), top 8-1.
DlrmSpec workload() {
  DlrmSpec w;
  w.name = "tiny";
  w.file = "tiny.json";
  w.batch_size = 8;
  w.bottom_mlp = {4, 8, 4};
  w.top_mlp = {8, 1};
  test::add_tables(w, {{"A", 100}, {"B", 60}, {"C", 10}}, 4, 2);
  return w;
}

/// A table_wise on rank 1; B column_wise, columns 0-1 on rank 0 and 2-3 on rank 1; C row_wise,
/// rows 0-4 on rank 0 and 5-9 on rank 1.
ShardingPlan mixed_plan() {
  ShardingPlan p;
  p.source = "plan.json";
  p.tables.push_back({ShardingType::kTableWise, {1}, {shard(0, 100, 0, 4, 1)}});
  p.tables.push_back({ShardingType::kColumnWise, {0, 1}, {shard(0, 60, 0, 2, 0), shard(0, 60, 2, 2, 1)}});
  p.tables.push_back({ShardingType::kRowWise, {0, 1}, {shard(0, 5, 0, 4, 0), shard(5, 5, 0, 4, 1)}});
  return p;
}

}  // namespace

TEST_CASE("multi-GPU layout: table-, column- and row-wise shards over 2 ranks", "[validation][multi_gpu]") {
  const auto L = multi_gpu_layout(workload(), mixed_plan(), 2);
  CHECK(L.world == 2);
  CHECK(L.global_batch == 8);
  CHECK(L.local_batch == 4);
  CHECK(L.total_dim == 12);      // 3 tables x 4
  CHECK(L.row_wise_dims == 4);   // C only
  REQUIRE(L.ranks.size() == 2);

  // Rank 0: B columns 0-1 (pooled columns 4-5), C rows 0-4 (pooled columns 8-11).
  const auto& r0 = L.ranks[0].shards;
  REQUIRE(r0.size() == 2);
  CHECK(r0[0].table == 1);
  CHECK(r0[0].type == ShardingType::kColumnWise);
  CHECK(r0[0].shard.col_offset == 0);
  CHECK(r0[0].shard.cols == 2);
  CHECK(r0[0].pooled_col == 4);
  CHECK(r0[1].table == 2);
  CHECK(r0[1].type == ShardingType::kRowWise);
  CHECK(r0[1].shard.row_offset == 0);
  CHECK(r0[1].shard.rows == 5);
  CHECK(r0[1].pooled_col == 8);
  CHECK(r0[1].row_wise_col == 0);
  // Rank 1: A whole (pooled 0-3), B columns 2-3 (pooled 6-7), C rows 5-9.
  const auto& r1 = L.ranks[1].shards;
  REQUIRE(r1.size() == 3);
  CHECK(r1[0].table == 0);
  CHECK(r1[0].shard.rows == 100);
  CHECK(r1[0].pooled_col == 0);
  CHECK(r1[1].table == 1);
  CHECK(r1[1].pooled_col == 6);
  CHECK(r1[2].table == 2);
  CHECK(r1[2].shard.row_offset == 5);
  CHECK(r1[2].shard.rows == 5);

  // The pooled all-to-all carries the table- and column-wise shards only.
  REQUIRE(L.ranks[0].pooled_send.size() == 1);
  CHECK(L.ranks[0].pooled_send[0].pooled_col == 4);
  CHECK(L.ranks[0].pooled_send_cols() == 2);
  REQUIRE(L.ranks[1].pooled_send.size() == 2);
  CHECK(L.ranks[1].pooled_send[0].pooled_col == 0);
  CHECK(L.ranks[1].pooled_send[0].cols == 4);
  CHECK(L.ranks[1].pooled_send[1].pooled_col == 6);
  CHECK(L.ranks[1].pooled_send_cols() == 6);

  // Forward bytes [src * 2 + dst]: rank 0 sends 4 samples x 2 cols x 4 B = 32 to each rank,
  // rank 1 sends 4 x 6 x 4 = 96; backward is the transpose.
  CHECK(L.pooled_bytes == std::vector<std::int64_t>{32, 32, 96, 96});
  CHECK(L.pooled_backward_bytes() == std::vector<std::int64_t>{32, 96, 32, 96});
  // Row-wise reduce-scatter of [8 samples, 4 dims] fp32 = 128 B (each rank keeps 64).
  CHECK(L.row_wise_bytes == 128);
  CHECK(L.data_parallel_bytes == 0);
}

TEST_CASE("multi-GPU layout: data-parallel copies and refused plans", "[validation][multi_gpu]") {
  const DlrmSpec w = workload();
  ShardingPlan p;
  p.source = "plan.json";
  p.tables.push_back({ShardingType::kDataParallel, {0, 1}, {shard(0, 100, 0, 4, 0), shard(0, 100, 0, 4, 1)}});
  p.tables.push_back({ShardingType::kTableWise, {0}, {shard(0, 60, 0, 4, 0)}});
  p.tables.push_back({ShardingType::kTableWise, {1}, {shard(0, 10, 0, 4, 1)}});
  const auto L = multi_gpu_layout(w, p, 2);
  CHECK(L.data_parallel_bytes == 100 * 4 * 4);
  CHECK(L.row_wise_dims == 0);
  CHECK(L.row_wise_bytes == 0);
  // Each rank sends one 4-column table: 4 samples x 4 x 4 B = 64.
  CHECK(L.pooled_bytes == std::vector<std::int64_t>{64, 64, 64, 64});
  CHECK(L.ranks[0].shards.size() == 2);  // A (copy), B
  CHECK(L.ranks[1].shards.size() == 2);  // A (copy), C

  SECTION("two row ranges of one block on one rank are refused, naming the table and rank") {
    p.tables[2] = {ShardingType::kTableRowWise, {0}, {shard(0, 5, 0, 4, 0), shard(5, 5, 0, 4, 0)}};
    try {
      (void)multi_gpu_layout(w, p, 2);
      FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      CHECK(what.find("'C'") != std::string::npos);
      CHECK(what.find("rank 0") != std::string::npos);
      CHECK(e.file() == "plan.json");
      CHECK(e.pointer() == "/tables/C/ranks");
    }
  }
  SECTION("grid shards that do not form column blocks are refused") {
    // Columns 0-1 split at row 5, columns 2-3 at row 3, but one shard spans columns 0-2.
    p.tables[2] = {ShardingType::kGrid,
                   {0, 1},
                   {shard(0, 5, 0, 3, 0), shard(5, 5, 0, 2, 1), shard(5, 5, 2, 2, 0), shard(0, 5, 3, 1, 1)}};
    CHECK_THROWS_AS(multi_gpu_layout(w, p, 2), ConfigError);
  }
  SECTION("a data-parallel table missing from a rank") {
    p.tables[0].shards.pop_back();
    CHECK_THROWS_AS(multi_gpu_layout(w, p, 2), ConfigError);
  }
  SECTION("a shard on a rank beyond the world") {
    p.tables[1].shards[0].rank = 2;
    CHECK_THROWS_AS(multi_gpu_layout(w, p, 2), ConfigError);
  }
  SECTION("a batch not divisible by the world") {
    DlrmSpec odd = w;
    odd.batch_size = 9;
    CHECK_THROWS_AS(multi_gpu_layout(odd, p, 2), ConfigError);
  }
}

TEST_CASE("DDP buckets: autograd order, first bucket then the rest, contiguous ranges", "[validation][multi_gpu]") {
  DlrmSpec w = workload();
  // Flat buffer: bottom 4->8 (40 elements at 0), 8->4 (36 at 40); top 10->8 (88 at 76),
  // 8->1 (9 at 164); 173 in all.
  SECTION("default caps (1 MiB, 25 MB): one bucket of everything") {
    const auto b = ddp_buckets(w);
    REQUIRE(b.size() == 1);
    CHECK(b[0].first_elem == 0);
    CHECK(b[0].elems == 173);
    CHECK(b[0].layers == std::vector<int>{3, 2, 1, 0});
  }
  SECTION("small caps: the first bucket closes at 100 B, the next would at 400 B") {
    w.first_bucket = 100;
    w.gradient_bucket = 400;
    const auto b = ddp_buckets(w);
    REQUIRE(b.size() == 2);
    // 8->1 is 36 B (< 100), plus 10->8 (352 B): 388 B closes the first bucket.
    CHECK(b[0].layers == std::vector<int>{3, 2});
    CHECK(b[0].first_elem == 76);
    CHECK(b[0].elems == 97);
    CHECK(b[0].bytes() == 388);
    // 144 + 160 = 304 B < 400: the rest is the last bucket.
    CHECK(b[1].layers == std::vector<int>{1, 0});
    CHECK(b[1].first_elem == 0);
    CHECK(b[1].elems == 76);
  }
}

TEST_CASE("split_batch: local samples, shard inputs, row-wise indices re-based", "[validation][multi_gpu]") {
  const DlrmSpec w = workload();
  const auto L = multi_gpu_layout(w, mixed_plan(), 2);
  // 8 samples, one index per bag: A row 10 s, B row 7 s, C row s; dense [s, s, s, s], label s % 2.
  DlrmBatch g;
  for (int s = 0; s < 8; ++s) {
    for (int f = 0; f < 4; ++f) g.dense.push_back(static_cast<float>(s));
    g.labels.push_back(static_cast<float>(s % 2));
  }
  g.offsets.push_back(0);
  for (int t = 0; t < 3; ++t)
    for (int s = 0; s < 8; ++s) {
      g.indices.push_back(t == 0 ? 10 * s : t == 1 ? 7 * s : s);
      g.offsets.push_back(static_cast<std::int64_t>(g.indices.size()));
    }

  const RankInput r0 = split_batch(L, w, g, 0);
  CHECK(r0.local.dense == std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  CHECK(r0.local.labels == std::vector<float>{0, 1, 0, 1});
  CHECK(r0.local.indices == std::vector<std::int64_t>{0, 10, 20, 30, 0, 7, 14, 21, 0, 1, 2, 3});
  CHECK(r0.local.offsets.size() == 13);
  // Pooled group: B's columns 0-1, all 8 samples.
  CHECK(r0.pooled.bags == 8);
  CHECK(r0.pooled.indices == std::vector<std::int64_t>{0, 7, 14, 21, 28, 35, 42, 49});
  CHECK(r0.pooled.offsets == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  // Row-wise group: C rows 0-4 see samples 0-4.
  CHECK(r0.row_wise.indices == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(r0.row_wise.offsets == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 5, 5, 5});
  CHECK(r0.data_parallel.offsets == std::vector<std::int64_t>{0});

  const RankInput r1 = split_batch(L, w, g, 1);
  CHECK(r1.local.labels == std::vector<float>{0, 1, 0, 1});
  CHECK(r1.local.indices == std::vector<std::int64_t>{40, 50, 60, 70, 28, 35, 42, 49, 4, 5, 6, 7});
  // Pooled group: A (all 8 samples) then B's columns 2-3 (all 8 samples).
  CHECK(r1.pooled.indices.size() == 16);
  CHECK(r1.pooled.indices[7] == 70);
  CHECK(r1.pooled.indices[8] == 0);
  CHECK(r1.pooled.offsets.size() == 17);
  // Row-wise group: C rows 5-9 see samples 5-7, as rows 0-2 of the shard.
  CHECK(r1.row_wise.indices == std::vector<std::int64_t>{0, 1, 2});
  CHECK(r1.row_wise.offsets == std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 1, 2, 3});
  // Index capacity per group: the largest count seen, never lowered.
  std::array<std::int64_t, 3> cap{20, 1, 0};
  grow_index_capacity(cap, r1);
  CHECK(cap == std::array<std::int64_t, 3>{20, 3, static_cast<std::int64_t>(r1.data_parallel.indices.size())});

  g.labels.pop_back();
  CHECK_THROWS_AS(split_batch(L, w, g, 0), std::invalid_argument);
}

TEST_CASE("multi-GPU layout: row-split tables on some ranks, grid blocks, table_column_wise", "[validation][multi_gpu]") {
  // A table_column_wise (columns 0-1 on rank 0, 2-3 on rank 1); B grid: column blocks 0-1
  // and 2-3, each split at row 30 over ranks 0 / 1 and 1 / 0; C table_row_wise on rank 1
  // alone (one range: all 10 rows). Row-wise blocks in table order, then column order:
  // B.0-1 at row-wise column 0, B.2-3 at 2, C (4 columns) at 4; row_wise_dims 8.
  ShardingPlan p;
  p.source = "plan.json";
  p.tables.push_back({ShardingType::kTableColumnWise, {0, 1}, {shard(0, 100, 0, 2, 0), shard(0, 100, 2, 2, 1)}});
  p.tables.push_back({ShardingType::kGrid,
                      {0, 1},
                      {shard(0, 30, 0, 2, 0), shard(30, 30, 0, 2, 1), shard(0, 30, 2, 2, 1), shard(30, 30, 2, 2, 0)}});
  p.tables.push_back({ShardingType::kTableRowWise, {1}, {shard(0, 10, 0, 4, 1)}});
  const DlrmSpec w = workload();
  const auto L = multi_gpu_layout(w, p, 2);
  CHECK(L.row_wise_dims == 8);
  REQUIRE(L.row_wise_blocks.size() == 3);
  CHECK(L.row_wise_blocks[0].table == 1);
  CHECK(L.row_wise_blocks[0].pooled_col == 4);  // B starts at pooled column 4 (after A's 4)
  CHECK(L.row_wise_blocks[0].row_wise_col == 0);
  CHECK(L.row_wise_blocks[1].pooled_col == 6);
  CHECK(L.row_wise_blocks[1].row_wise_col == 2);
  CHECK(L.row_wise_blocks[2].table == 2);
  CHECK(L.row_wise_blocks[2].pooled_col == 8);
  CHECK(L.row_wise_blocks[2].row_wise_col == 4);
  CHECK(L.row_wise_blocks[2].cols == 4);
  // The whole partial-sum array: 8 samples x 8 columns x 4 B.
  CHECK(L.row_wise_bytes == 8 * 8 * 4);
  // table_column_wise travels in the pooled all-to-all: each rank sends 2 columns of 4 samples.
  CHECK(L.pooled_bytes == std::vector<std::int64_t>{32, 32, 32, 32});
  // Rank 0: A cols 0-1 (pooled), B rows 0-29 cols 0-1 and rows 30-59 cols 2-3 (row-wise).
  const auto& r0 = L.ranks[0];
  REQUIRE(r0.row_wise_group.size() == 2);
  CHECK(r0.shards[r0.row_wise_group[0]].row_wise_col == 0);
  CHECK(r0.shards[r0.row_wise_group[1]].row_wise_col == 2);
  // Rank 1 holds B's other two ranges and all of C.
  const auto& r1 = L.ranks[1];
  REQUIRE(r1.row_wise_group.size() == 3);
  CHECK(r1.shards[r1.row_wise_group[2]].row_wise_col == 4);

  // The lookups write at their blocks' columns of the [B, 8] partial sums; rank 0 never
  // writes C's columns 4-7 (they stay zero).
  std::vector<profiler::TableShape> shapes;
  for (const std::size_t k : r0.row_wise_group) {
    shapes.push_back({r0.shards[k].shard.rows, static_cast<std::int32_t>(r0.shards[k].shard.cols)});
  }
  auto layout = profiler::make_embedding_bag_layout(shapes, L.global_batch);
  place_row_wise_outputs(layout, L, 0);
  CHECK(layout.total_dim == 8);
  CHECK(layout.tables[0].output_offset == 0);
  CHECK(layout.tables[1].output_offset == 2);
  CHECK_THROWS_AS(place_row_wise_outputs(layout, L, 1), std::invalid_argument);  // rank 1 has 3 shards

  // split_batch re-bases each range's indices: rank 0's second B shard starts at row 30.
  DlrmBatch g;
  g.dense.assign(8 * 4, 0.0f);
  g.labels.assign(8, 0.0f);
  g.offsets.push_back(0);
  for (std::int64_t t = 0; t < 3; ++t) {
    for (std::int64_t s = 0; s < 8; ++s) {
      g.indices.push_back(t == 1 ? (s % 2 == 0 ? 3 : 45) : 1);  // B: even samples row 3, odd row 45
      g.offsets.push_back(static_cast<std::int64_t>(g.indices.size()));
    }
  }
  const RankInput in = split_batch(L, w, g, 0);
  REQUIRE(in.row_wise.offsets.size() == 2 * 8 + 1);
  // First range (rows 0-29): the 4 even samples' row 3; second (rows 30-59): the odd ones' 45 - 30.
  CHECK(in.row_wise.indices == std::vector<std::int64_t>{3, 3, 3, 3, 15, 15, 15, 15});
}

TEST_CASE("multi-GPU layout: the bytes the executor exchanges are the ones the model predicts", "[validation][multi_gpu]") {
  DlrmSpec w = workload();
  w.first_bucket = 100;  // two DDP buckets (see the DDP test above)
  w.gradient_bucket = 400;
  const ShardingPlan plan = mixed_plan();
  const auto L = multi_gpu_layout(w, plan, 2);
  const ExecutionGraph g = build_dlrm_graph(w, plan, 2);
  const auto desc = [&](const std::string& name) -> const CollectiveDesc* {
    for (const auto& op : g.ranks[0].ops) {
      if (op.name == name && op.collective) return &g.collectives[static_cast<std::size_t>(*op.collective)].desc;
    }
    return nullptr;
  };
  const CollectiveDesc* fwd = desc("output_dist");
  REQUIRE(fwd != nullptr);
  REQUIRE(fwd->pair_bytes.size() == L.pooled_bytes.size());
  for (std::size_t i = 0; i < L.pooled_bytes.size(); ++i) {
    CHECK(fwd->pair_bytes[i] == Approx(static_cast<double>(L.pooled_bytes[i])));
  }
  const CollectiveDesc* bwd = desc("output_dist.backward");
  REQUIRE(bwd != nullptr);
  const auto back = L.pooled_backward_bytes();
  for (std::size_t i = 0; i < back.size(); ++i) CHECK(bwd->pair_bytes[i] == Approx(static_cast<double>(back[i])));
  const CollectiveDesc* rw = desc("output_dist.row_wise");
  REQUIRE(rw != nullptr);
  CHECK(rw->kind == CollectiveKind::kReduceScatter);
  CHECK(rw->bytes == Approx(static_cast<double>(L.row_wise_bytes)));
  const CollectiveDesc* rwb = desc("output_dist.row_wise.backward");
  REQUIRE(rwb != nullptr);
  CHECK(rwb->kind == CollectiveKind::kAllGather);
  CHECK(rwb->bytes == Approx(static_cast<double>(L.row_wise_bytes)));
  REQUIRE(L.buckets.size() == 2);
  for (std::size_t k = 0; k < L.buckets.size(); ++k) {
    const CollectiveDesc* b = desc("allreduce.bucket" + std::to_string(k));
    REQUIRE(b != nullptr);
    CHECK(b->bytes == Approx(static_cast<double>(L.buckets[k].bytes())));
  }
}

}  // namespace perfcast_test_validation_multi_gpu_layout_test
