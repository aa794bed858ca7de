#pragma once
/// \file time_limit.hpp
/// The hard wall-clock limit of a command (`--timeout`, and `plan --budget`). Work inside
/// the command stops cooperatively at the limit (core/deadline.hpp: searches and grids
/// report what they have, a single prediction exits 3); this watchdog is the backstop for
/// work that does not check in time (one long parse or fit): it ends the process at the
/// limit plus the stated tolerance, the larger of 1 s and 10% of the limit, less a margin,
/// after removing every uncommitted staging file, so that nothing partial is written.

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace perfcast::cli {

/// Seconds past a limit of `limit_s` seconds at which the watchdog ends the process: 80% of
/// the tolerance max(1 s, 10% of the limit), so that the exit itself stays within it.
[[nodiscard]] double watchdog_grace_s(double limit_s);

class TimeLimitWatchdog {
 public:
  /// Starts watching when `limit_s` > 0 (else does nothing); `label` names the option in
  /// the message, e.g. "--timeout 5s".
  TimeLimitWatchdog(double limit_s, std::string label);
  /// Stops watching (the command finished in time).
  ~TimeLimitWatchdog();
  TimeLimitWatchdog(const TimeLimitWatchdog&) = delete;
  TimeLimitWatchdog& operator=(const TimeLimitWatchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace perfcast::cli
