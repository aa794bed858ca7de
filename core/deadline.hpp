#pragma once
/// \file deadline.hpp
/// Wall-clock limits on long work (`--timeout`, `--budget`; Python `timeout=`), cooperative:
/// the command sets a limit for the calling thread with ScopedDeadline, and the long loops
/// (the simulator's event loop, graph building, searches, grids) call check_deadline(),
/// which throws DeadlineExceeded once the limit has passed. A search or grid catches it
/// around one candidate and reports that candidate as not run; a single prediction lets it
/// reach the command, which says it was stopped (exit 3, docs/robustness.md).
///
/// Contract: with a limit of L seconds, work that checks at least every few milliseconds
/// stops within L + (time between two checks) + (the time to unwind and report). Threads
/// do not inherit a limit: a pool takes current_deadline() and sets it in each worker.

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

namespace perfcast {

using SteadyTime = std::chrono::steady_clock::time_point;

/// The limit passed: thrown by check_deadline(). `what()` names the option that set it.
class DeadlineExceeded : public std::runtime_error {
 public:
  explicit DeadlineExceeded(const std::string& message) : std::runtime_error(message) {}
};

/// A limit for this thread for the lifetime of the object; nested limits keep the earlier
/// of the two, and the previous limit is restored on destruction.
class ScopedDeadline {
 public:
  /// `label` names the limit in the message, e.g. "--timeout 30s".
  ScopedDeadline(std::optional<SteadyTime> until, std::string label);
  /// `seconds` <= 0 sets no limit (the object then changes nothing).
  ScopedDeadline(double seconds, std::string label);
  ~ScopedDeadline();
  ScopedDeadline(const ScopedDeadline&) = delete;
  ScopedDeadline& operator=(const ScopedDeadline&) = delete;

 private:
  std::optional<SteadyTime> previous_until_;
  std::string previous_label_;
};

/// This thread's limit and its label (none: std::nullopt).
[[nodiscard]] std::optional<SteadyTime> current_deadline();
[[nodiscard]] const std::string& current_deadline_label();

/// Throws DeadlineExceeded when this thread's limit has passed. Cheap enough for inner
/// loops: it reads the clock only every 64th call (a clock read is ~20 ns).
void check_deadline();

/// True when this thread's limit has passed (reads the clock every call).
[[nodiscard]] bool deadline_passed();

/// Seconds left before this thread's limit (+infinity without one; 0 once passed).
[[nodiscard]] double seconds_left();

}  // namespace perfcast
