/// \file time_limit.cpp

#include "cli/time_limit.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "cli/log.hpp"
#include "core/staged_output.hpp"

namespace perfcast::cli {

double watchdog_grace_s(double limit_s) { return 0.8 * std::max(1.0, 0.1 * limit_s); }

TimeLimitWatchdog::TimeLimitWatchdog(double limit_s, std::string label) {
  if (!(limit_s > 0)) return;
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(limit_s + watchdog_grace_s(limit_s)));
  thread_ = std::thread([this, until, label = std::move(label)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wake_.wait_until(lock, until, [this] { return finished_; })) return;
    // Exit code 3 as for a command stopped cooperatively (cli/main.cpp); nothing partial
    // stays: staging files are removed, and no target was replaced.
    log().error("stopped by {}: the command did not finish in time; nothing written", label);
    log().flush();
    remove_uncommitted_staging();
    std::fflush(stdout);
    std::_Exit(3);
  });
}

TimeLimitWatchdog::~TimeLimitWatchdog() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

}  // namespace perfcast::cli
