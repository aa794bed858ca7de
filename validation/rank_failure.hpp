#pragma once
/// \file rank_failure.hpp
/// "First error wins" for a job of one host thread per rank (the multi-GPU executor,
/// executor_cuda.cpp): the first thread that fails records its exception and runs an abort
/// action exactly once (there: abort the NCCL communicators of the other ranks, so ranks
/// blocked inside a collective return); later failures, usually consequences of that abort,
/// are ignored. After the threads are joined, rethrow_if_failed() throws the first error as a
/// RankError whose message starts with "rank R: ". run_in_lockstep() is the executor's thread
/// structure (one thread per rank, barriers around every iteration) with that failure handling.
/// CPU only (no CUDA), thread-safe.

#include <atomic>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>

namespace perfcast::validation {

/// The first failure of a multi-rank job: what() is "rank R: <the original what()>" (or
/// "host thread: ..." for RankFailure::kHostThread); original() is the exception itself.
class RankError : public std::runtime_error {
 public:
  RankError(int rank, const std::string& message, std::exception_ptr original);
  /// The failing rank, or RankFailure::kHostThread.
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] std::exception_ptr original() const noexcept { return original_; }

 private:
  int rank_;
  std::exception_ptr original_;
};

class RankFailure {
 public:
  /// The "rank" of the thread that coordinates the ranks (timing, tracer) in messages.
  static constexpr int kHostThread = -1;
  /// Run once, on the thread of the first failure, with that failure's rank. Must not throw
  /// (record() is noexcept: a throwing action ends the program).
  using AbortAction = std::function<void(int failed_rank)>;

  /// `on_first_failure` may be empty (nothing to abort).
  explicit RankFailure(AbortAction on_first_failure = {});
  RankFailure(const RankFailure&) = delete;
  RankFailure& operator=(const RankFailure&) = delete;

  /// Records that `rank` failed with `error` (a null exception_ptr is recorded as "unknown
  /// error"). The first call stores it, marks the job failed and runs the abort action before
  /// returning true; every later call (any thread, also concurrent ones) returns false and
  /// changes nothing.
  bool record(int rank, std::exception_ptr error) noexcept;

  /// True once a failure was recorded (acquire: the recording thread's writes before
  /// record() are visible). Cheap: one atomic load, meant for loops between iterations.
  [[nodiscard]] bool failed() const noexcept;

  /// The first failure's rank; only meaningful when failed().
  [[nodiscard]] int failed_rank() const noexcept;

  /// Throws RankError for the first recorded failure; does nothing when none was recorded.
  /// Call after the recording threads were joined (or after failed() returned true).
  void rethrow_if_failed() const;

 private:
  AbortAction on_first_failure_;
  std::atomic<bool> claimed_{false};  // set by the one record() call that wins
  std::atomic<bool> failed_{false};   // released after rank_ and error_ are written
  int rank_ = 0;
  std::exception_ptr error_;
};

/// What run_in_lockstep runs. Every hook may throw; the exception is recorded in the
/// RankFailure (rank r for `step`, RankFailure::kHostThread for the others).
struct LockstepHooks {
  /// Iteration `iteration` of rank `rank`, on that rank's own thread (required).
  std::function<void(int rank, int iteration)> step;
  /// On the calling (host) thread before an iteration starts, while every rank waits at the
  /// barrier, so nothing is in flight (e.g. start a tracer). May be empty.
  std::function<void(int iteration)> before_iteration;
  /// On the host thread after every rank finished `iteration`: `wall_s` is the time from just
  /// before the iteration's first barrier to just after its second one (the slowest rank, as
  /// a synchronous data-parallel job sees it), in seconds. Not called once a failure was
  /// recorded. May be empty.
  std::function<void(int iteration, double wall_s)> after_iteration;
};

/// Runs `iterations` iterations of `world` ranks, one std::thread per rank, in lockstep: every
/// iteration starts when all ranks and the host thread passed a barrier and ends at a second
/// one. A rank whose step throws records the error in `failure` (the first one runs its abort
/// action, which must make ranks blocked in a step return, e.g. by aborting their NCCL
/// communicators) and leaves the barrier (arrive_and_drop). Every remaining thread stops at the
/// next iteration start: the barrier's completion step copies failure.failed() once per phase,
/// so all threads see the same value and none starts a step the others skip. Returns after
/// joining all threads; failure.failed() tells whether all iterations ran. No synchronization
/// is added to a successful iteration besides the two barriers. world >= 1
/// (std::invalid_argument otherwise).
void run_in_lockstep(int world, int iterations, const LockstepHooks& hooks, RankFailure& failure);

}  // namespace perfcast::validation
