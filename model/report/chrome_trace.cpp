#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "model/report/report.hpp"

namespace perfcast {
namespace {

/// Appends `s` as a JSON string literal.
void append_json_string(fmt::memory_buffer& b, std::string_view s) {
  b.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': b.append(std::string_view("\\\"")); break;
      case '\\': b.append(std::string_view("\\\\")); break;
      case '\n': b.append(std::string_view("\\n")); break;
      case '\t': b.append(std::string_view("\\t")); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) fmt::format_to(std::back_inserter(b), "\\u{:04x}", static_cast<int>(c));
        else b.push_back(c);
    }
  }
  b.push_back('"');
}

/// A plain or gzip file (or a string) written through a buffer; `close` reports write errors.
class TraceSink {
 public:
  explicit TraceSink(std::string* out) : out_(out) {}
  TraceSink(const std::string& path, bool gzip) : path_(path), gzip_(gzip) {
    if (gzip_) gz_ = gzopen(path.c_str(), "wb6");
    else f_ = std::fopen(path.c_str(), "wb");
    if (gz_ == nullptr && f_ == nullptr) throw std::runtime_error("cannot write " + path);
  }
  ~TraceSink() {
    if (gz_) gzclose(gz_);
    if (f_) std::fclose(f_);
  }
  fmt::memory_buffer& buffer() { return buf_; }
  /// Writes the buffer out once it holds more than 1 MiB (or always, with force).
  void flush(bool force = false) {
    if (buf_.size() == 0 || (!force && buf_.size() < (1u << 20))) return;
    bool ok = true;
    if (out_) out_->append(buf_.data(), buf_.size());
    else if (gz_) ok = gzwrite(gz_, buf_.data(), static_cast<unsigned>(buf_.size())) == static_cast<int>(buf_.size());
    else ok = std::fwrite(buf_.data(), 1, buf_.size(), f_) == buf_.size();
    if (!ok) throw std::runtime_error("cannot write " + path_);
    buf_.clear();
  }
  void close() {
    flush(true);
    const int rc = out_ ? 0 : gz_ ? gzclose(gz_) : std::fclose(f_);
    gz_ = nullptr;
    f_ = nullptr;
    if (rc != 0) throw std::runtime_error("cannot write " + path_);
  }

 private:
  std::string* out_ = nullptr;
  std::string path_;
  bool gzip_ = false;
  std::FILE* f_ = nullptr;
  gzFile gz_ = nullptr;
  fmt::memory_buffer buf_;
};

bool selected(const std::vector<int>& filter, int v) {
  return filter.empty() || std::find(filter.begin(), filter.end(), v) != filter.end();
}

/// Writes the trace into `sink`: metadata, then one "X" event per timeline event that
/// passes the filters, in timeline order (memory: one event's text at a time).
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
    fmt::format_to(std::back_inserter(b), R"({{"ph":"M","name":"process_name","pid":{0},"args":{{"name":"rank {0}"}}}},)"
                                          "\n" R"({{"ph":"M","name":"process_sort_index","pid":{0},"args":{{"sort_index":{0}}}}})",
                   r);
    for (int l = 0; l < kLaneCount; ++l) {
      fmt::format_to(std::back_inserter(b), ",\n" R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"{}"}}}})",
                     r, l, lane_name(static_cast<Lane>(l)));
    }
  }
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

void write_chrome_trace(const Prediction& p, const std::string& path, const ChromeTraceOptions& o) {
  for (int r : o.ranks)
    if (r < 0 || r >= p.timeline.world)
      throw ConfigError("--trace-ranks", std::to_string(r), fmt::format("expected ranks in [0, {})", p.timeline.world));
  for (int i : o.iterations)
    if (i < 0 || i >= p.timeline.iterations)
      throw ConfigError("--trace-iterations", std::to_string(i),
                        fmt::format("expected iterations in [0, {}) (--iterations simulated)", p.timeline.iterations));
  if (path == "-") {  // standard output
    std::string out;
    TraceSink sink(&out);
    stream_events(p, o, sink);
    sink.close();
    std::fwrite(out.data(), 1, out.size(), stdout);
    return;
  }
  // Written beside the target and renamed over it at the end: never a partial trace.
  const std::string tmp = path + ".tmp" + std::to_string(static_cast<long long>(std::rand()));
  try {
    TraceSink sink(tmp, ends_with(path, ".gz"));
    stream_events(p, o, sink);
    sink.close();
    std::filesystem::rename(tmp, path);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
}

}  // namespace perfcast
