// Time limits (core/deadline.hpp): a limit holds for the thread that set it, nested limits
// keep the earlier, and check_deadline throws once the limit has passed.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <thread>

#include "core/deadline.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_core_deadline_test {

using namespace perfcast;

namespace {

/// Calls check_deadline until it throws (at most `calls` times); true when it threw.
bool throws_within(int calls) {
  try {
    for (int i = 0; i < calls; ++i) check_deadline();
  } catch (const DeadlineExceeded&) {
    return true;
  }
  return false;
}

}  // namespace

TEST_CASE("deadline: no limit never stops the work") {
  REQUIRE_FALSE(current_deadline().has_value());
  REQUIRE(std::isinf(seconds_left()));
  REQUIRE_FALSE(deadline_passed());
  REQUIRE_FALSE(throws_within(10000));
  const ScopedDeadline none(0.0, "--timeout 0s");  // <= 0: no limit
  REQUIRE_FALSE(current_deadline().has_value());
}

TEST_CASE("deadline: a passed limit stops the work and names its option") {
  const ScopedDeadline limit(1e-9, "--timeout 1ns");
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(deadline_passed());
  REQUIRE(seconds_left() == 0.0);
  try {
    for (int i = 0; i < 1000; ++i) check_deadline();  // the clock is read every 64th call
    FAIL("check_deadline did not throw");
  } catch (const DeadlineExceeded& e) {
    REQUIRE(std::string(e.what()) == "stopped by --timeout 1ns before the work finished");
  }
}

TEST_CASE("deadline: a limit in the future lets the work go on") {
  const ScopedDeadline limit(3600.0, "--timeout 1h");
  REQUIRE(current_deadline().has_value());
  REQUIRE(seconds_left() > 3500);
  REQUIRE(seconds_left() <= 3600);
  REQUIRE_FALSE(throws_within(10000));
}

TEST_CASE("deadline: nested limits keep the earlier one and restore the outer one") {
  const ScopedDeadline outer(3600.0, "outer");
  const auto outer_until = current_deadline();
  {
    const ScopedDeadline later(7200.0, "later");  // later than the outer one: changes nothing
    REQUIRE(current_deadline() == outer_until);
    REQUIRE(current_deadline_label() == "outer");
    const ScopedDeadline earlier(1e-9, "earlier");
    REQUIRE(current_deadline_label() == "earlier");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(deadline_passed());
  }
  REQUIRE(current_deadline() == outer_until);
  REQUIRE(current_deadline_label() == "outer");
  REQUIRE_FALSE(deadline_passed());
}

TEST_CASE("deadline: threads do not inherit a limit; a pool passes it on") {
  const ScopedDeadline limit(1e-9, "--timeout 1ns");
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  bool other_thread_limited = true, passed_on = false;
  const auto until = current_deadline();
  std::thread([&] {
    other_thread_limited = current_deadline().has_value();
    const ScopedDeadline inherited(until, "inherited");
    passed_on = deadline_passed();
  }).join();
  REQUIRE_FALSE(other_thread_limited);
  REQUIRE(passed_on);
}

}  // namespace perfcast_test_core_deadline_test
