/// \file deadline.cpp
/// The thread-local limit behind ScopedDeadline and check_deadline (deadline.hpp).

#include "core/deadline.hpp"

#include <limits>
#include <utility>

#include <fmt/format.h>

namespace perfcast {
namespace {

struct ThreadLimit {
  std::optional<SteadyTime> until;
  std::string label;
  unsigned calls = 0;  ///< check_deadline calls since the last clock read
};

ThreadLimit& thread_limit() {
  thread_local ThreadLimit limit;
  return limit;
}

[[noreturn]] void throw_exceeded(const ThreadLimit& limit) {
  throw DeadlineExceeded(fmt::format("stopped by {} before the work finished", limit.label.empty() ? "the time limit" : limit.label));
}

}  // namespace

ScopedDeadline::ScopedDeadline(std::optional<SteadyTime> until, std::string label) {
  ThreadLimit& t = thread_limit();
  previous_until_ = t.until;
  previous_label_ = t.label;
  if (until && (!t.until || *until < *t.until)) {
    t.until = until;
    t.label = std::move(label);
  }
}

ScopedDeadline::ScopedDeadline(double seconds, std::string label)
    : ScopedDeadline(seconds > 0 ? std::optional<SteadyTime>(std::chrono::steady_clock::now() +
                                                             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                 std::chrono::duration<double>(seconds)))
                                 : std::nullopt,
                     std::move(label)) {}

ScopedDeadline::~ScopedDeadline() {
  ThreadLimit& t = thread_limit();
  t.until = previous_until_;
  t.label = std::move(previous_label_);
}

std::optional<SteadyTime> current_deadline() { return thread_limit().until; }

const std::string& current_deadline_label() { return thread_limit().label; }

void check_deadline() {
  ThreadLimit& t = thread_limit();
  if (!t.until) return;
  if (++t.calls < 64) return;
  t.calls = 0;
  if (std::chrono::steady_clock::now() >= *t.until) throw_exceeded(t);
}

bool deadline_passed() {
  const ThreadLimit& t = thread_limit();
  return t.until && std::chrono::steady_clock::now() >= *t.until;
}

double seconds_left() {
  const ThreadLimit& t = thread_limit();
  if (!t.until) return std::numeric_limits<double>::infinity();
  const double left = std::chrono::duration<double>(*t.until - std::chrono::steady_clock::now()).count();
  return left > 0 ? left : 0.0;
}

}  // namespace perfcast
