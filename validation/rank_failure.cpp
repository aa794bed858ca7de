#include "validation/rank_failure.hpp"

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <thread>
#include <utility>
#include <vector>

namespace perfcast::validation {
namespace {

std::string who(int rank) { return rank == RankFailure::kHostThread ? "host thread" : "rank " + std::to_string(rank); }

std::string describe(const std::exception_ptr& e) {
  if (!e) return "unknown error";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception (not derived from std::exception)";
  }
}

}  // namespace

RankError::RankError(int rank, const std::string& message, std::exception_ptr original)
    : std::runtime_error(who(rank) + ": " + message), rank_(rank), original_(std::move(original)) {}

RankFailure::RankFailure(AbortAction on_first_failure) : on_first_failure_(std::move(on_first_failure)) {}

bool RankFailure::record(int rank, std::exception_ptr error) noexcept {
  // exchange: exactly one caller sees false, however many threads fail at once.
  if (claimed_.exchange(true, std::memory_order_acq_rel)) return false;
  rank_ = rank;
  error_ = std::move(error);
  failed_.store(true, std::memory_order_release);
  if (on_first_failure_) on_first_failure_(rank);
  return true;
}

bool RankFailure::failed() const noexcept { return failed_.load(std::memory_order_acquire); }

int RankFailure::failed_rank() const noexcept { return failed() ? rank_ : 0; }

void RankFailure::rethrow_if_failed() const {
  if (!failed()) return;
  throw RankError(rank_, describe(error_), error_);
}

void run_in_lockstep(int world, int iterations, const LockstepHooks& hooks, RankFailure& failure) {
  if (world < 1) throw std::invalid_argument("run_in_lockstep: world must be >= 1");
  if (!hooks.step) throw std::invalid_argument("run_in_lockstep: no step");
  // Written only by the barrier's completion step (all participants arrived, none running),
  // read by every participant after the phase: the same snapshot for all of them.
  std::atomic<bool> stop{false};
  const auto on_phase = [&stop, &failure]() noexcept { stop.store(failure.failed(), std::memory_order_relaxed); };
  std::barrier sync(static_cast<std::ptrdiff_t>(world) + 1, on_phase);

  const auto rank_loop = [&](int r) {
    try {
      for (int it = 0; it < iterations; ++it) {
        sync.arrive_and_wait();
        if (stop.load(std::memory_order_relaxed)) return;  // every participant stops at this phase
        hooks.step(r, it);
        sync.arrive_and_wait();
      }
    } catch (...) {
      failure.record(r, std::current_exception());  // the first failure runs the abort action
      sync.arrive_and_drop();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(world));
  try {
    for (int r = 0; r < world; ++r) threads.emplace_back(rank_loop, r);
  } catch (...) {  // std::system_error: no thread for the remaining ranks
    failure.record(RankFailure::kHostThread, std::current_exception());
    for (auto r = threads.size(); r < static_cast<std::size_t>(world); ++r) sync.arrive_and_drop();
  }

  for (int it = 0; it < iterations; ++it) {
    try {
      if (hooks.before_iteration && !failure.failed()) hooks.before_iteration(it);
    } catch (...) {
      failure.record(RankFailure::kHostThread, std::current_exception());  // the ranks stop at the barrier
    }
    const auto t0 = std::chrono::steady_clock::now();
    sync.arrive_and_wait();
    if (stop.load(std::memory_order_relaxed)) break;
    sync.arrive_and_wait();
    const auto t1 = std::chrono::steady_clock::now();
    if (failure.failed() || !hooks.after_iteration) continue;
    try {
      hooks.after_iteration(it, std::chrono::duration<double>(t1 - t0).count());
    } catch (...) {
      failure.record(RankFailure::kHostThread, std::current_exception());
    }
  }
  for (auto& t : threads) t.join();
}

}  // namespace perfcast::validation
