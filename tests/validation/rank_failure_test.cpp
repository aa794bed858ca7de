// "First error wins" across rank threads and the lockstep loop of the multi-GPU executor
// (validation/rank_failure.hpp), on the CPU: a fake collective that, like an NCCL kernel,
// waits for every rank unless its rank was aborted stands in for the GPUs. The last two tests
// abort real NCCL communicators (NcclComm::abort); they skip (with a warning) unless the build
// has CUDA and NCCL and enough GPUs are visible.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "profiler/device_info.hpp"
#include "validation/rank_failure.hpp"

#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
#include <future>
#include <memory>

#include <cuda_runtime_api.h>

#include "profiler/cuda_check.hpp"
#include "validation/nccl_comm.hpp"
#endif

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_validation_rank_failure_test {

using namespace perfcast::validation;

namespace {

/// The message of the RankError that rethrow_if_failed throws ("" when none).
std::string rethrown_message(const RankFailure& f) {
  try {
    f.rethrow_if_failed();
  } catch (const RankError& e) {
    return e.what();
  }
  return "";
}

/// An all-ranks collective per iteration: collective(r, it) returns when every rank of the
/// world entered iteration it's collective, or throws once rank r was aborted (as an aborted
/// NCCL communicator makes its kernels exit). Never blocks longer than 10 s: then it throws
/// "hung", so a broken abort fails the test instead of hanging it.
class FakeCollective {
 public:
  explicit FakeCollective(int world) : world_(world), arrived_(64, 0), aborted_(static_cast<std::size_t>(world), false) {}

  void collective(int rank, int it) {
    std::unique_lock<std::mutex> lock(m_);
    const auto i = static_cast<std::size_t>(it);
    ++arrived_[i];
    cv_.notify_all();
    const bool done = cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      return arrived_[i] == world_ || aborted_[static_cast<std::size_t>(rank)];
    });
    if (!done) throw std::runtime_error("hung");
    if (arrived_[i] != world_) throw std::runtime_error("communicator of rank " + std::to_string(rank) + " aborted");
  }
  void abort(int rank) {
    const std::lock_guard<std::mutex> lock(m_);
    aborted_[static_cast<std::size_t>(rank)] = true;
    cv_.notify_all();
  }
  int aborted_count() {
    const std::lock_guard<std::mutex> lock(m_);
    int n = 0;
    for (const bool a : aborted_) n += a ? 1 : 0;
    return n;
  }

 private:
  int world_;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<int> arrived_;
  std::vector<bool> aborted_;
};

}  // namespace

TEST_CASE("RankFailure: nothing recorded, nothing thrown, no abort", "[validation][rank_failure]") {
  int aborts = 0;
  RankFailure f([&](int) { ++aborts; });
  CHECK_FALSE(f.failed());
  CHECK_NOTHROW(f.rethrow_if_failed());
  CHECK(aborts == 0);
}

TEST_CASE("RankFailure: the first error is rethrown with its rank, later ones are ignored", "[validation][rank_failure]") {
  std::vector<int> aborted_for;
  RankFailure f([&](int r) { aborted_for.push_back(r); });
  CHECK(f.record(2, std::make_exception_ptr(std::out_of_range("batch 7 of 4"))));
  CHECK_FALSE(f.record(0, std::make_exception_ptr(std::runtime_error("aborted by rank 2"))));
  CHECK_FALSE(f.record(RankFailure::kHostThread, std::make_exception_ptr(std::runtime_error("late"))));
  REQUIRE(aborted_for == std::vector<int>{2});
  CHECK(f.failed());
  CHECK(f.failed_rank() == 2);
  CHECK(rethrown_message(f) == "rank 2: batch 7 of 4");
  try {
    f.rethrow_if_failed();
    FAIL("nothing thrown");
  } catch (const RankError& e) {
    CHECK(e.rank() == 2);
    // The original exception, type included, stays reachable.
    CHECK_THROWS_AS(std::rethrow_exception(e.original()), std::out_of_range);
  }
  // Rethrowing twice gives the same error (nothing is consumed).
  CHECK(rethrown_message(f) == "rank 2: batch 7 of 4");
}

TEST_CASE("RankFailure: host thread, non-standard and null errors", "[validation][rank_failure]") {
  RankFailure host;  // no abort action
  host.record(RankFailure::kHostThread, std::make_exception_ptr(std::runtime_error("CUPTI unavailable")));
  CHECK(rethrown_message(host) == "host thread: CUPTI unavailable");

  RankFailure odd;
  odd.record(5, std::make_exception_ptr(42));
  CHECK(rethrown_message(odd) == "rank 5: unknown exception (not derived from std::exception)");

  RankFailure null;
  null.record(0, nullptr);
  CHECK(rethrown_message(null) == "rank 0: unknown error");
}

TEST_CASE("RankFailure: many threads failing at once abort exactly once", "[validation][rank_failure]") {
  constexpr int kThreads = 8;
  for (int round = 0; round < 50; ++round) {
    std::atomic<int> aborts{0};
    std::atomic<int> abort_rank{-100};
    std::atomic<bool> failed_inside_action{false};
    RankFailure* self = nullptr;
    RankFailure f([&](int r) {
      aborts.fetch_add(1);
      abort_rank.store(r);
      failed_inside_action.store(self->failed());  // already marked failed while aborting
    });
    self = &f;
    std::atomic<int> ready{0};
    std::atomic<int> winners{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < kThreads; ++r) {
      threads.emplace_back([&, r] {
        ready.fetch_add(1);
        while (ready.load() < kThreads) std::this_thread::yield();  // fail as simultaneously as possible
        try {
          throw std::runtime_error("boom " + std::to_string(r));
        } catch (...) {
          if (f.record(r, std::current_exception())) winners.fetch_add(1);
        }
      });
    }
    for (auto& t : threads) t.join();
    REQUIRE(aborts.load() == 1);
    REQUIRE(winners.load() == 1);
    CHECK(failed_inside_action.load());
    const int w = abort_rank.load();
    REQUIRE(w >= 0);
    REQUIRE(w < kThreads);
    CHECK(f.failed_rank() == w);
    CHECK(rethrown_message(f) == "rank " + std::to_string(w) + ": boom " + std::to_string(w));
  }
}

TEST_CASE("run_in_lockstep: a successful run keeps every rank in step", "[validation][rank_failure]") {
  constexpr int kWorld = 4, kIters = 6;
  std::array<std::atomic<int>, kIters> entered{};
  std::array<std::atomic<int>, kIters> finished{};
  std::atomic<int> out_of_step{0};
  std::vector<std::vector<int>> order(kWorld);
  std::vector<double> wall;
  std::atomic<int> aborts{0};
  RankFailure f([&](int) { aborts.fetch_add(1); });  // no Catch macros off the test thread
  LockstepHooks h;
  h.step = [&](int r, int it) {
    const auto i = static_cast<std::size_t>(it);
    // Every rank finished the previous iteration before anyone starts this one.
    if (it > 0 && finished[i - 1].load() != kWorld) out_of_step.fetch_add(1);
    entered[i].fetch_add(1);
    order[static_cast<std::size_t>(r)].push_back(it);  // one writer per rank
    finished[i].fetch_add(1);
  };
  h.after_iteration = [&](int it, double s) {
    CHECK(finished[static_cast<std::size_t>(it)].load() == kWorld);  // the second barrier was passed
    wall.push_back(s);
  };
  run_in_lockstep(kWorld, kIters, h, f);
  CHECK_FALSE(f.failed());
  CHECK(aborts.load() == 0);
  CHECK(out_of_step.load() == 0);
  for (const auto& o : order) CHECK(o == std::vector<int>{0, 1, 2, 3, 4, 5});
  REQUIRE(wall.size() == kIters);
  for (const double s : wall) CHECK(s >= 0.0);
}

TEST_CASE("run_in_lockstep: a rank failing while the others wait in a collective does not hang",
          "[validation][rank_failure]") {
  constexpr int kWorld = 4, kIters = 5;
  FakeCollective coll(kWorld);
  std::atomic<int> action_calls{0};
  RankFailure f([&](int failed) {
    action_calls.fetch_add(1);
    for (int r = 0; r < kWorld; ++r) {
      if (r != failed) coll.abort(r);  // what the executor does with the NCCL communicators
    }
  });
  std::atomic<int> steps_after_failure{0};
  std::atomic<int> after_iteration_calls{0};
  LockstepHooks h;
  h.step = [&](int r, int it) {
    if (it > 1) steps_after_failure.fetch_add(1);
    if (r == 2 && it == 1) throw std::runtime_error("injected failure at iteration 1");
    coll.collective(r, it);  // ranks 0, 1 and 3 block here in iteration 1 until aborted
  };
  h.after_iteration = [&](int, double) { after_iteration_calls.fetch_add(1); };
  run_in_lockstep(kWorld, kIters, h, f);
  REQUIRE(f.failed());
  CHECK(action_calls.load() == 1);
  CHECK(coll.aborted_count() == kWorld - 1);
  CHECK(rethrown_message(f) == "rank 2: injected failure at iteration 1");
  CHECK(steps_after_failure.load() == 0);     // nobody started iteration 2
  CHECK(after_iteration_calls.load() == 1);   // iteration 0 only
}

TEST_CASE("run_in_lockstep: several ranks failing in the same iteration", "[validation][rank_failure]") {
  constexpr int kWorld = 6;
  for (int round = 0; round < 20; ++round) {
    FakeCollective coll(kWorld);
    std::atomic<int> action_calls{0};
    std::atomic<int> action_rank{-100};
    RankFailure f([&](int failed) {
      action_calls.fetch_add(1);
      action_rank.store(failed);
      for (int r = 0; r < kWorld; ++r) {
        if (r != failed) coll.abort(r);
      }
    });
    LockstepHooks h;
    h.step = [&](int r, int it) {
      if (it == 2 && r % 2 == 0) throw std::runtime_error("rank " + std::to_string(r) + " out of memory");
      coll.collective(r, it);
    };
    run_in_lockstep(kWorld, 4, h, f);
    REQUIRE(action_calls.load() == 1);
    const int w = action_rank.load();
    CHECK(w % 2 == 0);
    CHECK(f.failed_rank() == w);
    CHECK(rethrown_message(f) == "rank " + std::to_string(w) + ": rank " + std::to_string(w) + " out of memory");
  }
}

TEST_CASE("run_in_lockstep: a host failure between iterations stops every rank", "[validation][rank_failure]") {
  constexpr int kWorld = 3, kIters = 5;
  FakeCollective coll(kWorld);
  std::vector<int> action_ranks;
  RankFailure f([&](int r) { action_ranks.push_back(r); });
  std::atomic<int> steps{0};
  LockstepHooks h;
  h.step = [&](int r, int it) {
    steps.fetch_add(1);
    coll.collective(r, it);
  };
  h.before_iteration = [&](int it) {
    if (it == 2) throw std::runtime_error("cannot start the tracer");
  };
  run_in_lockstep(kWorld, kIters, h, f);
  CHECK(action_ranks == std::vector<int>{RankFailure::kHostThread});
  CHECK(steps.load() == 2 * kWorld);  // iterations 0 and 1, nothing of iteration 2
  CHECK(rethrown_message(f) == "host thread: cannot start the tracer");
}

TEST_CASE("run_in_lockstep: a failure in the last iteration, after the collective", "[validation][rank_failure]") {
  constexpr int kWorld = 2, kIters = 3;
  FakeCollective coll(kWorld);
  RankFailure f([&](int failed) { coll.abort(1 - failed); });
  std::atomic<int> steps{0};
  LockstepHooks h;
  h.step = [&](int r, int it) {
    coll.collective(r, it);
    steps.fetch_add(1);
    if (r == 1 && it == kIters - 1) throw std::runtime_error("NaN loss");
  };
  run_in_lockstep(kWorld, kIters, h, f);
  CHECK(steps.load() == kWorld * kIters);
  CHECK(rethrown_message(f) == "rank 1: NaN loss");
}

TEST_CASE("run_in_lockstep: bad arguments", "[validation][rank_failure]") {
  RankFailure f;
  LockstepHooks h;
  h.step = [](int, int) {};
  CHECK_THROWS_AS(run_in_lockstep(0, 1, h, f), std::invalid_argument);
  CHECK_THROWS_AS(run_in_lockstep(2, 1, LockstepHooks{}, f), std::invalid_argument);
  run_in_lockstep(2, 0, h, f);  // zero iterations: nothing runs, nothing fails
  CHECK_FALSE(f.failed());
}

namespace {

bool skip_without_gpus(int needed) {
#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
  const int n = perfcast::profiler::cuda_device_available() ? perfcast::profiler::cuda_device_count() : 0;
  if (n >= needed) return false;
  WARN("skipped: " << n << " CUDA device(s) visible, this test needs " << needed);
#else
  (void)needed;
  WARN("skipped: built without CUDA or NCCL");
#endif
  return true;
}

#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
/// `count` floats on the current device and a stream, freed at scope exit.
struct DeviceScratch {
  float* data = nullptr;
  cudaStream_t stream = nullptr;
  explicit DeviceScratch(std::size_t count) {
    PERFCAST_CUDA_CHECK(cudaStreamCreate(&stream));
    PERFCAST_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(float)));
    PERFCAST_CUDA_CHECK(cudaMemset(data, 0, count * sizeof(float)));
  }
  ~DeviceScratch() {
    cudaFree(data);
    cudaStreamDestroy(stream);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
};
#endif

}  // namespace

TEST_CASE("NcclComm::abort: idempotent, later collectives throw", "[validation][rank_failure][gpu]") {
  if (skip_without_gpus(1)) return;
#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
  auto comms = NcclComm::init_all({0});
  PERFCAST_CUDA_CHECK(cudaSetDevice(0));
  DeviceScratch buf(256);
  comms[0]->all_reduce(buf.data, 256, buf.stream);  // one rank: a copy, completes alone
  PERFCAST_CUDA_CHECK(cudaStreamSynchronize(buf.stream));
  CHECK_NOTHROW(comms[0]->check_async_error());
  CHECK_FALSE(comms[0]->aborted());
  comms[0]->abort();
  CHECK(comms[0]->aborted());
  comms[0]->abort();  // no second ncclCommAbort (that would be a use after free)
  CHECK_THROWS_WITH(comms[0]->all_reduce(buf.data, 256, buf.stream), Catch::Contains("was aborted"));
  CHECK_THROWS_WITH(comms[0]->check_async_error(), Catch::Contains("was aborted"));
  int device = -1;
  PERFCAST_CUDA_CHECK(cudaGetDevice(&device));
  CHECK(device == 0);  // abort() restores the current device
  // ~NcclComm does not call ncclCommDestroy on the aborted communicator.
#endif
}

TEST_CASE("NcclComm::abort releases a rank whose peer never joins the collective",
          "[validation][rank_failure][gpu]") {
  if (skip_without_gpus(2)) return;
#if defined(PERFCAST_HAVE_NCCL) && PERFCAST_HAVE_NCCL
  constexpr std::size_t kCount = 1024;
  auto comms = NcclComm::init_all({0, 1});
  {  // Both ranks once, so NCCL's connections for this size exist.
    std::vector<std::thread> warm;
    std::vector<std::string> errors(2);
    for (int r = 0; r < 2; ++r) {
      warm.emplace_back([&, r] {
        try {
          PERFCAST_CUDA_CHECK(cudaSetDevice(r));
          DeviceScratch buf(kCount);
          comms[static_cast<std::size_t>(r)]->all_reduce(buf.data, kCount, buf.stream);
          PERFCAST_CUDA_CHECK(cudaStreamSynchronize(buf.stream));
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(r)] = e.what();
        }
      });
    }
    for (auto& t : warm) t.join();
    REQUIRE(errors[0].empty());
    REQUIRE(errors[1].empty());
  }
  // Rank 0 alone: its all-reduce kernel waits for rank 1, which never comes (rank 1 "failed").
  std::promise<std::string> outcome;
  auto done = outcome.get_future();
  std::thread waiter([&] {
    std::string what = "returned";
    try {
      PERFCAST_CUDA_CHECK(cudaSetDevice(0));
      DeviceScratch buf(kCount);
      comms[0]->all_reduce(buf.data, kCount, buf.stream);
      PERFCAST_CUDA_CHECK(cudaStreamSynchronize(buf.stream));
    } catch (const std::exception& e) {
      what = std::string("threw: ") + e.what();
    }
    outcome.set_value(what);
  });
  const bool waited = done.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout;
  RankFailure failure([&](int failed) {
    for (const auto& c : comms) {
      if (c->rank() != failed) c->abort();
    }
  });
  CHECK(failure.record(1, std::make_exception_ptr(std::runtime_error("cuBLASLt failed"))));
  CHECK(comms[0]->aborted());
  CHECK_FALSE(comms[1]->aborted());
  // Without the abort this waits forever; if it does not return in 30 s, REQUIRE fails and the
  // joinable thread ends the test program (std::terminate) instead of hanging it.
  const bool released = done.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  REQUIRE(released);
  waiter.join();
  CHECK(waited);  // it really was blocked before the abort
  INFO("rank 0 after the abort: " << done.get());
  comms[1]->abort();  // after the join, as run_dlrm_multi does
  CHECK(rethrown_message(failure) == "rank 1: cuBLASLt failed");
#endif
}

}  // namespace perfcast_test_validation_rank_failure_test
