// Interval merging: hand-worked lists, and orders the timeline analysis hands over (a few
// ascending runs from periodic folding, scattered out-of-order intervals, random) checked
// against a plain sort-then-merge.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <utility>

#include "core/intervals.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_core_intervals_test {

using namespace perfcast;

namespace {

/// The reference: std::sort first, so merge_intervals takes its already-sorted path; what
/// is checked is the sorting of unsorted input (runs merged, or the out-of-order rest sorted).
TimeIntervals reference_merge(TimeIntervals v) {
  std::sort(v.begin(), v.end());
  return merge_intervals(std::move(v));
}

}  // namespace

TEST_CASE("merge_intervals: hand-worked", "[intervals]") {
  CHECK(merge_intervals({{3, 4}, {0, 1}, {1, 2}, {5, 5}, {3.5, 6}}) == TimeIntervals{{0, 2}, {3, 6}});
  CHECK(total_length(merge_intervals({{3, 4}, {0, 1}, {1, 2}, {3.5, 6}})) == Approx(5));
  CHECK(overlap_length({{0, 2}, {3, 6}}, {{1, 4}}) == Approx(2));
  CHECK(merge_intervals({}).empty());
}

TEST_CASE("merge_intervals: runs, scattered and random orders equal sort-then-merge", "[intervals]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> start(0, 1000), len(0, 5);
  for (int runs : {1, 2, 3, 5, 16, 17, 200}) {
    CAPTURE(runs);
    TimeIntervals v;
    for (int r = 0; r < runs; ++r) {  // `runs` ascending runs of 50 intervals each
      TimeIntervals run;
      for (int i = 0; i < 50; ++i) {
        const double s = start(rng);
        run.push_back({s, s + len(rng)});
      }
      std::sort(run.begin(), run.end());
      v.insert(v.end(), run.begin(), run.end());
    }
    CHECK(merge_intervals(v) == reference_merge(v));
  }
  TimeIntervals scattered;  // sorted, with every 10th interval moved out of place
  for (int i = 0; i < 500; ++i) scattered.push_back({double(i), i + 0.5});
  for (std::size_t i = 0; i + 10 < scattered.size(); i += 10) std::swap(scattered[i], scattered[i + 7]);
  CHECK(merge_intervals(scattered) == reference_merge(scattered));
}

}  // namespace perfcast_test_core_intervals_test
