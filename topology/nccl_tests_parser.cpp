#include "topology/nccl_tests_parser.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/input_file.hpp"
#include "core/json_reader.hpp"
#include "core/limits.hpp"

namespace perfcast {
namespace {

// Text logs are parsed with plain scanning (no std::regex: its recursion overflows the
// stack on long lines), one line at a time, each at most limits::kMaxTextLineBytes.

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

std::vector<std::string> split_ws(std::string_view line) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    const std::size_t b = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > b) out.emplace_back(line.substr(b, i - b));
  }
  return out;
}

std::vector<std::string> split_csv(std::string_view line) {
  std::vector<std::string> out;
  std::size_t b = 0;
  for (;;) {
    const std::size_t e = line.find(',', b);
    out.emplace_back(line.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
    if (e == std::string_view::npos) break;
    b = e + 1;
  }
  if (!out.empty() && out.back().empty()) out.pop_back();  // as std::getline did
  return out;
}

/// A finite decimal number, the whole token (no "nan", "inf", hex or overflow).
bool parse_double(std::string_view s, double& v) {
  if (s.empty()) return false;
  const char* b = s.data();
  if (*b == '+') ++b;
  const auto [ptr, ec] = std::from_chars(b, s.data() + s.size(), v);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(v);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

[[noreturn]] void fail(const std::string& file, int line, const std::string& msg) {
  throw ConfigError(file, line > 0 ? fmt::format("line {}", line) : "", msg);
}

/// Splits text into lines (without '\n' and a trailing '\r'), refusing overlong lines.
std::vector<std::string_view> text_lines(std::string_view text, const std::string& name) {
  std::vector<std::string_view> lines;
  std::size_t b = 0;
  while (b < text.size()) {
    std::size_t e = text.find('\n', b);
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = text.substr(b, e - b);
    if (line.size() > limits::kMaxTextLineBytes)
      fail(name, static_cast<int>(lines.size() + 1),
           fmt::format("a line of {} bytes; lines of a log are at most {} bytes", line.size(), limits::kMaxTextLineBytes));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    b = e + 1;
  }
  return lines;
}

/// The collective named before the first '_' of a vTrain table name ("AR_GPU8_..."):
/// AR, AG, RS, A2A, AllReduce, AllGather, ReduceScatter.
std::optional<CollectiveKind> kind_from_file_prefix(const std::string& base) {
  const auto us = base.find('_');
  if (us == std::string::npos) return std::nullopt;
  const std::string p = lower(base.substr(0, us));
  for (const char* k : {"ar", "ag", "rs", "a2a", "allreduce", "allgather", "reducescatter"})
    if (p == k) return collective_from_name(p);
  return std::nullopt;
}

/// n of the first "GPU<n>" (any case) in a file name, or nullopt; n beyond
/// limits::kMaxRanks is an error.
std::optional<int> ranks_from_file_name(const std::string& base, const std::string& name) {
  const std::string l = lower(base);
  for (std::size_t p = l.find("gpu"); p != std::string::npos; p = l.find("gpu", p + 1)) {
    std::size_t e = p + 3;
    while (e < l.size() && is_digit(l[e])) ++e;
    if (e == p + 3) continue;
    const std::string digits = l.substr(p + 3, e - p - 3);
    if (digits.size() > 9 || std::stoi(digits) > limits::kMaxRanks)
      fail(name, 0, fmt::format("the file name says GPU{}; perfcast handles at most {} ranks", digits, limits::kMaxRanks));
    return std::stoi(digits);
  }
  return std::nullopt;
}

/// The word after `marker` in `line` ("Collective test starting: all_reduce_perf").
std::optional<std::string> word_after(std::string_view line, std::string_view marker, bool (*ok)(char)) {
  const auto p = line.find(marker);
  if (p == std::string_view::npos) return std::nullopt;
  std::size_t b = p + marker.size();
  while (b < line.size() && is_space(line[b])) ++b;
  std::size_t e = b;
  while (e < line.size() && ok(line[e])) ++e;
  if (e == b) return std::nullopt;
  return std::string(line.substr(b, e - b));
}

bool is_version_char(char c) { return is_digit(c) || c == '.' || c == '+' || (c >= 'a' && c <= 'z'); }

/// A device line "#  Rank  0 Group  0 Pid  1234 on  host-a device  0 [0x1b] NVIDIA H100":
/// the GPU name (text after the bracketed bus id) and the host, or nullopt.
struct RankLine {
  std::string gpu;
  std::optional<std::string> host;
};
std::optional<RankLine> parse_rank_line(std::string_view line) {
  const auto tok = split_ws(line);
  if (tok.size() < 3 || tok[0] != "#" || tok[1] != "Rank" || !std::all_of(tok[2].begin(), tok[2].end(), is_digit))
    return std::nullopt;
  RankLine r;
  for (std::size_t i = 3; i + 2 < tok.size(); ++i) {
    if (tok[i] == "on" && i + 3 < tok.size() && tok[i + 2] == "device") r.host = tok[i + 1];
    if (tok[i] != "device" || !std::all_of(tok[i + 1].begin(), tok[i + 1].end(), is_digit) || tok[i + 2].front() != '[')
      continue;
    // The GPU name: everything after the ']' that closes the bus id.
    const auto bracket = line.find(']', line.find(tok[i + 2]));
    if (bracket == std::string_view::npos) return std::nullopt;
    std::size_t b = bracket + 1;
    if (b >= line.size() || !is_space(line[b])) return std::nullopt;
    while (b < line.size() && is_space(line[b])) ++b;
    r.gpu = std::string(line.substr(b));
    return r;
  }
  return std::nullopt;
}

/// A measured row: size in [0, limits::kMaxBytes] bytes, time finite and > 0.
bool valid_sample(double bytes, double time_s) {
  return bytes >= 0 && bytes <= limits::kMaxBytes && time_s > 0 && time_s <= limits::kMaxTime;
}

CollectiveLog parse_csv(const std::string& text, const std::string& name, const LogHints& hints) {
  CollectiveLog log;
  log.file = name;
  log.format = "csv";
  std::optional<CollectiveKind> kind = hints.kind;
  std::optional<int> ranks = hints.ranks;
  const std::string base = std::filesystem::path(name).filename().string();
  if (!kind) kind = kind_from_file_prefix(base);
  if (!ranks) ranks = ranks_from_file_name(base, name);
  if (!kind) fail(name, 0, "cannot tell the collective: name the file AR_/AG_/RS_/A2A_... or pass --collective");
  if (!ranks || *ranks < 1) fail(name, 0, "cannot tell the rank count: name the file ..._GPU<n>_... or pass --ranks");
  int time_col = -1;
  double time_scale = 1e-9;
  const auto lines = text_lines(text, name);
  for (std::size_t li = 0; li < lines.size(); ++li) {
    const int lineno = static_cast<int>(li + 1);
    if (lines[li].empty()) continue;
    const auto cols = split_csv(lines[li]);
    if (time_col < 0) {
      for (std::size_t i = 0; i < cols.size(); ++i) {
        const std::string c = lower(cols[i]);
        if (c.rfind("time", 0) == 0) {
          time_col = static_cast<int>(i);
          time_scale = c.find("(us)") != std::string::npos ? 1e-6 : c.find("(ms)") != std::string::npos ? 1e-3 : 1e-9;
          break;
        }
      }
      if (time_col < 0 || cols.empty() || lower(cols[0]).rfind("size", 0) != 0)
        fail(name, lineno, "expected a header \"size(B),...,time(ns),...\"");
      continue;
    }
    double bytes = 0, t = 0;
    if (static_cast<int>(cols.size()) <= time_col || !parse_double(cols[0], bytes) ||
        !parse_double(cols[static_cast<std::size_t>(time_col)], t) || !valid_sample(bytes, t * time_scale)) {
      fail(name, lineno,
           fmt::format("expected a size in [0, {:g}] bytes in column 1 and a time > 0 in column {}", limits::kMaxBytes,
                       time_col + 1));
    }
    log.samples.push_back(CollectiveSample{*kind, *ranks, hints.nodes, bytes, t * time_scale, name});
  }
  if (log.samples.empty()) fail(name, 0, "no data rows");
  return log;
}

CollectiveLog parse_nccl_tests(const std::string& text, const std::string& name, const LogHints& hints) {
  CollectiveLog log;
  log.file = name;
  log.format = "nccl-tests";
  std::optional<CollectiveKind> kind = hints.kind;
  int rank_lines = 0;
  std::vector<std::string> header;
  std::set<std::string> hosts;  // the host names tell how many nodes the run spanned
  std::vector<std::pair<int, std::vector<std::string>>> rows;
  const auto lines = text_lines(text, name);
  for (std::size_t li = 0; li < lines.size(); ++li) {
    const std::string_view line = lines[li];
    const int lineno = static_cast<int>(li + 1);
    if (!kind) {
      if (const auto test = word_after(line, "Collective test starting:", is_word)) kind = collective_from_name(*test);
    }
    if (const auto rank = parse_rank_line(line)) {
      ++rank_lines;
      if (log.gpu.empty()) log.gpu = rank->gpu;
      if (rank->host) hosts.insert(*rank->host);
      continue;
    }
    if (log.nccl_version.empty()) {
      auto v = word_after(line, "NCCL version", is_version_char);
      if (!v) v = word_after(line, "nccl-library=", is_version_char);
      if (v) log.nccl_version = *v;
    }
    const auto tok = split_ws(line);
    if (tok.empty()) continue;
    if (tok[0] == "#") {
      if (tok.size() > 3 && tok[1] == "size" && tok[2] == "count") header.assign(tok.begin() + 1, tok.end());
      continue;
    }
    if (tok[0][0] == '#') continue;
    double size = 0;
    if (!parse_double(tok[0], size)) {
      // NCCL INFO lines and the like; a number that is not finite is a damaged row.
      const std::string t0 = lower(tok[0]);
      static const std::set<std::string> kNotFinite = {"nan", "-nan", "+nan", "inf", "-inf", "+inf", "infinity", "-infinity"};
      if (kNotFinite.count(t0) ||
          ((is_digit(t0[0]) || t0[0] == '-') && t0.find_first_not_of("0123456789.e+-") == std::string::npos))
        fail(name, lineno, fmt::format("expected a finite message size, got \"{}\"", tok[0]));
      continue;
    }
    rows.emplace_back(lineno, tok);
  }
  if (!kind) fail(name, 0, "cannot tell the collective: no \"Collective test starting\" line; pass --collective");
  const int ranks = hints.ranks ? *hints.ranks : rank_lines;
  if (ranks < 1) fail(name, 0, "no \"#  Rank\" device lines; pass --ranks");
  if (ranks > limits::kMaxRanks) fail(name, 0, fmt::format("{} ranks; perfcast handles at most {}", ranks, limits::kMaxRanks));
  const int nodes = hosts.size() > 1 ? static_cast<int>(hosts.size()) : hints.nodes;
  if (header.empty()) fail(name, 0, "no nccl-tests header line \"#  size  count  type ...\"");
  const auto time_it = std::find(header.begin(), header.end(), "time");
  if (time_it == header.end()) fail(name, 0, "the header has no \"time\" column");
  const auto time_col = static_cast<std::size_t>(time_it - header.begin());
  for (const auto& [ln, tok] : rows) {
    double bytes = 0, t = 0;
    if (tok.size() <= time_col || !parse_double(tok[0], bytes) || !parse_double(tok[time_col], t) ||
        !valid_sample(bytes, t * 1e-6)) {
      fail(name, ln,
           fmt::format("expected a row with a size in [0, {:g}] bytes and a time > 0 (us) in column {} (\"{}\")",
                       limits::kMaxBytes, time_col + 1, fmt::join(tok, " ")));
    }
    log.samples.push_back(CollectiveSample{*kind, ranks, nodes, bytes, t * 1e-6, name});
  }
  if (log.samples.empty()) fail(name, 0, "no data rows");
  return log;
}

}  // namespace

double bus_factor(CollectiveKind kind, int n) {
  const double nd = n;
  switch (kind) {
    case CollectiveKind::kAllReduce: return 2 * (nd - 1) / nd;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce: return 1.0;
    default: return (nd - 1) / nd;
  }
}

std::optional<CollectiveKind> collective_from_name(const std::string& raw) {
  std::string s = lower(raw);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.size() > 4 && s.substr(s.size() - 4) == "perf") s.resize(s.size() - 4);
  if (s == "allreduce" || s == "ar") return CollectiveKind::kAllReduce;
  if (s == "allgather" || s == "ag") return CollectiveKind::kAllGather;
  if (s == "reducescatter" || s == "rs") return CollectiveKind::kReduceScatter;
  if (s == "alltoall" || s == "a2a") return CollectiveKind::kAllToAll;
  if (s == "broadcast") return CollectiveKind::kBroadcast;
  if (s == "reduce") return CollectiveKind::kReduce;
  return std::nullopt;
}

CollectiveLog parse_collective_log_text(const std::string& with_bom, const std::string& name, const LogHints& hints) {
  // A UTF-8 byte-order mark (spreadsheet exports) is not part of the first line: with it, a
  // CSV table used to be taken for an nccl-tests log.
  const std::string text = with_bom.rfind("\xEF\xBB\xBF", 0) == 0 ? with_bom.substr(3) : with_bom;
  require_utf8(text, name);  // the GPU name, host and version reach JSON outputs
  if (hints.ranks && (*hints.ranks < 1 || *hints.ranks > limits::kMaxRanks))
    fail(name, 0, fmt::format("--ranks {} is outside [1, {}]", *hints.ranks, limits::kMaxRanks));
  // A CSV table starts with "size" and has commas in its first line.
  const auto first_nl = text.find('\n');
  const std::string first = lower(text.substr(0, first_nl));
  if (first.rfind("size", 0) == 0 && first.find(',') != std::string::npos) return parse_csv(text, name, hints);
  return parse_nccl_tests(text, name, hints);
}

CollectiveLog parse_collective_log(const std::string& path, const LogHints& hints) {
  return parse_collective_log_text(read_input_file(path), path, hints);
}

}  // namespace perfcast
