// Max-min fair sharing and the fluid finish times, worked by hand.
#include <catch2/catch.hpp>

#include "model/sim/link_contention.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_link_contention_test {

using namespace perfcast;

TEST_CASE("max-min speeds: the classic bottleneck example", "[contention]") {
  // A uses link 1; B uses links 1 and 2; C and D use link 2. Link 2 fills first with
  // three flows at 1/3 each; A then gets what B leaves on link 1: 2/3.
  const ContentionFlow a{0, 1, {{1, 1.0}}}, b{0, 1, {{1, 1.0}, {2, 1.0}}}, c{0, 1, {{2, 1.0}}}, d{0, 1, {{2, 1.0}}};
  const auto s = max_min_speeds({&a, &b, &c, &d});
  CHECK(s[0] == Approx(2.0 / 3));
  CHECK(s[1] == Approx(1.0 / 3));
  CHECK(s[2] == Approx(1.0 / 3));
  CHECK(s[3] == Approx(1.0 / 3));
  // Two flows that together use less than the link keep their solo speed.
  const ContentionFlow e{0, 1, {{1, 0.3}}}, f{0, 1, {{1, 0.6}}};
  const auto g = max_min_speeds({&e, &f});
  CHECK(g[0] == 1.0);
  CHECK(g[1] == 1.0);
}

TEST_CASE("max-min speeds: flows of different loads on one link, solved exactly", "[contention]") {
  // One link; A loads it 0.2 at solo speed, B 1.0. At fair level b, A's speed is
  // min(1, b / 0.2) and B's min(1, b): demand 0.2 min(1, b / 0.2) + min(1, b) fills the link
  // at b = 0.8 (A at full speed: 0.2 + 0.8 = 1). So A keeps speed 1 and B runs at 0.8.
  const ContentionFlow a{0, 1, {{3, 0.2}}}, b{0, 1, {{3, 1.0}}};
  const auto s = max_min_speeds({&a, &b});
  CHECK(s[0] == 1.0);
  CHECK(s[1] == Approx(0.8).epsilon(1e-14));
  // Three flows loading 0.5 each: the level where 3 x 0.5 x b / 0.5 = 1, b = 1/3, each at
  // speed 2/3 (exactly, not to a bisection's precision).
  const ContentionFlow c{0, 1, {{3, 0.5}}}, d{0, 1, {{3, 0.5}}}, e{0, 1, {{3, 0.5}}};
  for (const double v : max_min_speeds({&c, &d, &e})) CHECK(v == Approx(2.0 / 3).epsilon(1e-14));
  // Never beyond the link: the speeds times the loads sum to at most 1.
  const auto t = max_min_speeds({&a, &b, &c});
  CHECK(0.2 * t[0] + 1.0 * t[1] + 0.5 * t[2] <= 1.0 + 1e-12);
}

TEST_CASE("fluid finish times: partial overlap, worked by hand", "[contention]") {
  // Copy 0-100 us alone; a second transfer on the same link starts at 50 us. 0-50: the copy
  // alone (50 done). Then both at half speed: the copy's last 50 take 100 -> ends 150;
  // the second has done 50 by then and runs its last 50 alone -> ends 200.
  const std::vector<ContentionFlow> flows{{0, 100, {{7, 1.0}}}, {50, 100, {{7, 1.0}}}, {10, 30, {{8, 1.0}}}};
  const auto t = fluid_finish_times(flows);
  CHECK(t[0] == Approx(150));
  CHECK(t[1] == Approx(200));
  CHECK(t[2] == Approx(40));  // another link: untouched
  CHECK(any_overlap(flows));
  CHECK_FALSE(any_overlap({{0, 100, {{7, 1.0}}}, {100, 100, {{7, 1.0}}}}));  // back to back
  CHECK_FALSE(any_overlap({{0, 100, {{7, 1.0}}}, {50, 100, {{8, 1.0}}}}));   // different links
}

}  // namespace perfcast_test_model_link_contention_test
