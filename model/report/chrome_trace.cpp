#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include "core/staged_output.hpp"
#include "model/report/report.hpp"
#include "model/report/trace_sink.hpp"

namespace perfcast {
namespace {

bool selected(const std::vector<int>& filter, int v) {
  return filter.empty() || std::find(filter.begin(), filter.end(), v) != filter.end();
}

/// Flow arrows between the ranks of one collective call: from the first rank's start of
/// the call (in timeline order) to every other rank's start of the same call. A call is
/// identified by (collective, iteration, n-th use of that collective on the rank in that
/// iteration): ranks of a group issue their collectives in the same order. Entries are
/// dropped once every member has been seen, so memory holds the calls in flight.
class CollectiveFlows {
 public:
  void add(const Prediction& p, const TimelineEvent& e, int collective, fmt::memory_buffer& b) {
    const std::uint64_t use = uses_[key(e.rank, e.iteration, collective)]++;
    const std::uint64_t call = key(collective, e.iteration, static_cast<int>(use));
    auto [it, first] = open_.try_emplace(call, Arrival{e.rank, e.start, 0});
    if (first) return;
    std::size_t members = 0;  // the simulated ones: mirrored ranks have no events
    for (int m : p.graph.groups[static_cast<std::size_t>(p.graph.collectives[static_cast<std::size_t>(collective)].group)].ranks)
      members += p.graph.simulated(m);
    const int comm = static_cast<int>(Lane::kComm);
    fmt::format_to(std::back_inserter(b),
                   ",\n" R"({{"ph":"s","id":{0},"name":"collective","cat":"collective","pid":{1},"tid":{2},"ts":{3:.3f}}})"
                   ",\n" R"({{"ph":"f","bp":"e","id":{0},"name":"collective","cat":"collective","pid":{4},"tid":{2},"ts":{5:.3f}}})",
                   next_id_++, it->second.rank, comm, it->second.start * 1e6, e.rank, e.start * 1e6);
    if (++it->second.seen + 1 >= members) open_.erase(it);
  }

 private:
  struct Arrival {
    int rank;
    Seconds start;
    std::size_t seen;  ///< members seen after the first
  };
  static std::uint64_t key(int a, int b, int c) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 40) ^ (static_cast<std::uint64_t>(static_cast<std::uint32_t>(b)) << 24) ^
           static_cast<std::uint64_t>(static_cast<std::uint32_t>(c));
  }
  std::unordered_map<std::uint64_t, std::uint64_t> uses_;
  std::unordered_map<std::uint64_t, Arrival> open_;
  std::uint64_t next_id_ = 1;
};

/// Writes the trace into `sink`: metadata, then one "X" event per timeline event that
/// passes the filters, in timeline order (memory: one event's text at a time), with flow
/// arrows between the ranks of each collective call.
void stream_events(const Prediction& p, const ChromeTraceOptions& o, TraceSink& sink) {
  auto& b = sink.buffer();
  b.append(std::string_view("{\"displayTimeUnit\":\"ms\",\"otherData\":"));
  b.append(context_json(p));
  b.append(std::string_view(",\"traceEvents\":[\n"));
  bool first = true;
  auto sep = [&] {
    if (!first) b.append(std::string_view(",\n"));
    first = false;
  };
  for (int r = 0; r < p.timeline.world; ++r) {
    if (!selected(o.ranks, r)) continue;
    sep();
    // A mirrored rank (symmetric simulation) has no events of its own: its name says whose it are.
    const std::string name = p.graph.simulated(r) ? fmt::format("rank {}", r)
                                                  : fmt::format("rank {} (runs as rank {}: not drawn)", r, p.graph.representative(r));
    fmt::format_to(std::back_inserter(b), R"({{"ph":"M","name":"process_name","pid":{0},"args":{{"name":"{1}"}}}},)"
                                          "\n" R"({{"ph":"M","name":"process_sort_index","pid":{0},"args":{{"sort_index":{0}}}}})",
                   r, name);
    for (int l = 0; l < kLaneCount; ++l) {
      fmt::format_to(std::back_inserter(b), ",\n" R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})",
                     r, l, lane_name(static_cast<Lane>(l)));
    }
  }
  CollectiveFlows flows;
  const auto& critical = p.analysis.critical_events;  // ascending
  auto next_critical = critical.begin();
  for (std::size_t i = 0; i < p.timeline.events.size(); ++i) {
    const TimelineEvent& e = p.timeline.events[i];
    while (next_critical != critical.end() && static_cast<std::size_t>(*next_critical) < i) ++next_critical;
    const bool on_critical_path = next_critical != critical.end() && static_cast<std::size_t>(*next_critical) == i;
    if (!selected(o.ranks, e.rank) || !selected(o.iterations, e.iteration)) continue;
    const Op& op = p.graph.ranks[static_cast<std::size_t>(e.rank)].ops[static_cast<std::size_t>(e.op)];
    sep();
    b.append(std::string_view("{\"ph\":\"X\",\"name\":"));
    append_json_string(b, op.name);
    fmt::format_to(std::back_inserter(b), R"(,"cat":"{}","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"iteration":{},"phase":"{}")",
                   lane_name(e.lane), e.rank, static_cast<int>(e.lane), e.start * 1e6, (e.end - e.start) * 1e6, e.iteration,
                   phase_name(op.phase));
    if (e.kernel >= 0) {
      b.append(std::string_view(",\"kernel\":"));
      append_json_string(b, kernel_label(op.kernels[static_cast<std::size_t>(e.kernel)]));
      b.append(std::string_view(",\"predictor\":"));
      append_json_string(b, p.timed.ops[static_cast<std::size_t>(e.rank)][static_cast<std::size_t>(e.op)]
                                .kernels[static_cast<std::size_t>(e.kernel)]
                                .predictor);
    }
    if (op.collective && e.lane == Lane::kComm) {
      const auto& c = p.graph.collectives[static_cast<std::size_t>(*op.collective)];
      const auto& est = p.timed.collectives[static_cast<std::size_t>(*op.collective)];
      fmt::format_to(std::back_inserter(b), R"(,"collective":"{}")", collective_name(c.desc.kind));
      if (c.desc.kind != CollectiveKind::kAllToAllV) fmt::format_to(std::back_inserter(b), R"(,"bytes":{:.0f})", c.desc.bytes);
      b.append(std::string_view(",\"algorithm\":"));
      append_json_string(b, est.algorithm);
      b.append(std::string_view(",\"protocol\":"));
      append_json_string(b, est.protocol);
    }
    if (on_critical_path) b.append(std::string_view(",\"critical_path\":true"));
    b.append(std::string_view("}}"));
    if (op.collective && e.lane == Lane::kComm) flows.add(p, e, *op.collective, b);
    sink.flush();
  }
  b.append(std::string_view("\n]}\n"));
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string render_chrome_trace(const Prediction& p) {
  std::string out;
  TraceSink sink(&out);
  stream_events(p, {}, sink);
  sink.close();
  return out;
}

void check_trace_options(const Prediction& p, const ChromeTraceOptions& o) {
  // An extrapolated prediction's timeline holds only its first simulated micro-batch count.
  if (p.steady_state)
    throw ConfigError("--trace", "", fmt::format("the prediction simulated {} of {} micro-batches and extrapolated the rest; a trace "
                                                 "needs every micro-batch simulated (--all-micro-batches)",
                                                 p.steady_state->simulated[0], p.steady_state->micro_batches));
  for (int r : o.ranks)
    if (r < 0 || r >= p.timeline.world)
      throw ConfigError("--trace-ranks", std::to_string(r), fmt::format("expected ranks in [0, {})", p.timeline.world));
  for (int i : o.iterations)
    if (i < 0 || i >= p.timeline.iterations)
      throw ConfigError("--trace-iterations", std::to_string(i),
                        fmt::format("expected iterations in [0, {}) (--iterations simulated)", p.timeline.iterations));
}

void write_chrome_trace(const Prediction& p, const std::string& path, const ChromeTraceOptions& o) {
  check_trace_options(p, o);
  if (path == "-") {  // standard output
    std::string out;
    TraceSink sink(&out);
    stream_events(p, o, sink);
    sink.close();
    write_stdout(out);
    return;
  }
  // Streamed into a staging file beside the target (core/staged_output.hpp) and renamed
  // over it at the end: never a partial trace, never through a link.
  StagedFile file(path);
  const int fd = ::dup(file.fd());
  if (fd < 0) throw OutputError("cannot write " + path);
  TraceSink sink(fd, path, ends_with(path, ".gz"));
  stream_events(p, o, sink);
  sink.close();
  file.commit();
}

}  // namespace perfcast
