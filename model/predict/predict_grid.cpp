#include "model/predict/predict_grid.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "core/deadline.hpp"

namespace perfcast {

GridAxis parse_grid_axis(const std::string& text, const std::string& option) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw ConfigError(option, text, "expected KEY=v1,v2,... e.g. system=a.json,b.json or workload.batch_size=1024,2048");
  }
  GridAxis a;
  a.key = text.substr(0, eq);
  std::size_t from = eq + 1;
  while (true) {
    const auto comma = text.find(',', from);
    const std::string v = text.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (v.empty()) throw ConfigError(option, text, "empty value in the comma-separated list");
    a.values.push_back(v);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return a;
}

namespace {

void apply_setting(PredictRequest& r, const std::string& key, const std::string& value) {
  if (key == "system") r.system = value;
  else if (key == "workload") r.workload = value;
  else if (key == "plan") r.plan = value;
  else r.overrides.push_back(key + "=" + value);
}

}  // namespace

std::vector<GridPoint> expand_grid(const PredictRequest& base, const std::vector<GridAxis>& axes) {
  // The grid's size is checked before any point is made: --timeout bounds the time the
  // points take, not the memory of a grid too large to list.
  std::size_t count = 1;
  for (const auto& axis : axes) {
    if (axis.values.size() > kMaxGridPoints / count)
      throw ConfigError("--compare / --sweep", axis.key,
                        fmt::format("the grid would have more than {} points; split it over several commands", kMaxGridPoints));
    count *= axis.values.size();
  }
  std::vector<GridPoint> points{GridPoint{{}, base}};
  points.reserve(count);
  for (const auto& axis : axes) {
    std::vector<GridPoint> next;
    for (const auto& p : points) {
      for (const auto& v : axis.values) {
        GridPoint q = p;
        q.settings.emplace_back(axis.key, v);
        apply_setting(q.request, axis.key, v);
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }
  return points;
}

std::vector<std::unique_ptr<Prediction>> run_grid(const std::vector<GridPoint>& points, unsigned threads,
                                                  const std::function<void(std::size_t, std::size_t)>& progress,
                                                  double timeout_s) {
  std::vector<std::unique_ptr<Prediction>> out(points.size());
  (void)run_grid_each(
      points, threads, [&](std::size_t i, std::unique_ptr<Prediction> p) { out[i] = std::move(p); }, progress, timeout_s);
  return out;
}

std::vector<bool> run_grid_each(const std::vector<GridPoint>& points, unsigned threads,
                                const std::function<void(std::size_t, std::unique_ptr<Prediction>)>& consume,
                                const std::function<void(std::size_t, std::size_t)>& progress, double timeout_s) {
  const std::size_t n = points.size();
  const auto start = std::chrono::steady_clock::now();
  // The grid's own limit and the caller's (a command's --timeout), set in every worker so
  // that a point running when either passes is cut (core/deadline.hpp) and counted as not run.
  const std::optional<SteadyTime> grid_until =
      timeout_s > 0 ? std::optional<SteadyTime>(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                            std::chrono::duration<double>(timeout_s)))
                    : std::nullopt;
  const std::optional<SteadyTime> caller_until = current_deadline();
  const std::string caller_label = current_deadline_label();
  auto out_of_time = [&] {
    const auto now = std::chrono::steady_clock::now();
    return (grid_until && now >= *grid_until) || (caller_until && now >= *caller_until);
  };
  std::vector<char> ran(n, 0);
  std::vector<std::exception_ptr> errors(n);
  // Never more threads than the machine has cores (or points): more only add switching, and
  // asking for 1,024 could exhaust what the process may create.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (threads == 0 || threads > cores) threads = cores;
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, std::max<std::size_t>(n, 1)));
  std::atomic<std::size_t> next{0}, done{0};
  std::atomic<bool> failed{false}, stopped{false};
  auto worker = [&] {
    const ScopedDeadline caller_limit(caller_until, caller_label);
    const ScopedDeadline grid_limit(grid_until, "--timeout");
    for (std::size_t i = next++; i < n && !failed; i = next++) {
      if (stopped || out_of_time()) {
        stopped = true;
        ++done;  // not run: counted so that the progress loop ends
        continue;
      }
      try {
        consume(i, predict(points[i].request));
        ran[i] = 1;
      } catch (const DeadlineExceeded&) {
        stopped = true;  // cut while running: not run, as the points after it
      } catch (...) {
        errors[i] = std::current_exception();
        failed = true;
      }
      ++done;
    }
  };
  std::vector<std::thread> pool;
  if (threads > 1) {
    for (unsigned t = 0; t < threads; ++t) {
      try {
        pool.emplace_back(worker);
      } catch (const std::system_error&) {
        break;  // the system gives no more threads: the ones started do the work
      }
    }
    if (pool.empty()) threads = 1;
  }
  if (threads <= 1) {
    worker();
  } else {
    // The calling thread reports progress while the pool works.
    while (done < n && !failed) {
      if (progress) progress(done, n);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  for (auto& t : pool) t.join();
  if (progress) progress(done, n);
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return {ran.begin(), ran.end()};
}

}  // namespace perfcast
