#include "topology/nccl_tests_parser.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/json_reader.hpp"

namespace perfcast {
namespace {

std::vector<std::string> split_ws(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string tok;
  while (in >> tok) out.push_back(tok);
  return out;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string tok;
  std::istringstream in(line);
  while (std::getline(in, tok, ',')) out.push_back(tok);
  return out;
}

bool parse_double(const std::string& s, double& v) {
  try {
    std::size_t used = 0;
    v = std::stod(s, &used);
    return used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

[[noreturn]] void fail(const std::string& file, int line, const std::string& msg) {
  throw ConfigError(file, line > 0 ? fmt::format("line {}", line) : "", msg);
}

CollectiveLog parse_csv(const std::string& text, const std::string& name, const LogHints& hints) {
  CollectiveLog log;
  log.file = name;
  log.format = "csv";
  std::optional<CollectiveKind> kind = hints.kind;
  std::optional<int> ranks = hints.ranks;
  const std::string base = std::filesystem::path(name).filename().string();
  std::smatch m;
  if (!kind && std::regex_search(base, m, std::regex("^(AR|AG|RS|A2A|AllReduce|AllGather|ReduceScatter)_", std::regex::icase))) {
    kind = collective_from_name(m[1].str());
  }
  if (!ranks && std::regex_search(base, m, std::regex("GPU(\\d+)", std::regex::icase))) ranks = std::stoi(m[1].str());
  if (!kind) fail(name, 0, "cannot tell the collective: name the file AR_/AG_/RS_/A2A_... or pass --collective");
  if (!ranks || *ranks < 1) fail(name, 0, "cannot tell the rank count: name the file ..._GPU<n>_... or pass --ranks");
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  int time_col = -1;
  double time_scale = 1e-9;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto cols = split_csv(line);
    if (time_col < 0) {
      for (std::size_t i = 0; i < cols.size(); ++i) {
        const std::string c = lower(cols[i]);
        if (c.rfind("time", 0) == 0) {
          time_col = static_cast<int>(i);
          time_scale = c.find("(us)") != std::string::npos ? 1e-6 : c.find("(ms)") != std::string::npos ? 1e-3 : 1e-9;
          break;
        }
      }
      if (time_col < 0 || lower(cols[0]).rfind("size", 0) != 0) fail(name, lineno, "expected a header \"size(B),...,time(ns),...\"");
      continue;
    }
    double bytes = 0, t = 0;
    if (static_cast<int>(cols.size()) <= time_col || !parse_double(cols[0], bytes) ||
        !parse_double(cols[static_cast<std::size_t>(time_col)], t) || bytes < 0 || t <= 0) {
      fail(name, lineno, fmt::format("expected numbers in columns 1 and {}", time_col + 1));
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
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  std::smatch m;
  const std::regex test_re("Collective test starting: (\\w+)");
  const std::regex rank_re("^#\\s+Rank\\s+\\d+.*device\\s+\\d+\\s+\\[[^\\]]*\\]\\s+(.*)$");
  const std::regex nccl_re("(?:NCCL version|nccl-library=)\\s*([0-9.+a-z]+)");
  // "#  Rank  0 Group  0 Pid  1234 on  host-a device  0 [0x1b] NVIDIA H100": the host names
  // tell how many nodes the run spanned.
  const std::regex host_re("\\bon\\s+(\\S+)\\s+device\\s+\\d+");
  std::set<std::string> hosts;
  std::vector<std::pair<int, std::vector<std::string>>> rows;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (std::regex_search(line, m, test_re) && !kind) kind = collective_from_name(m[1].str());
    if (std::regex_search(line, m, rank_re)) {
      ++rank_lines;
      if (log.gpu.empty()) log.gpu = m[1].str();
      if (std::smatch h; std::regex_search(line, h, host_re)) hosts.insert(h[1].str());
      continue;
    }
    if (log.nccl_version.empty() && std::regex_search(line, m, nccl_re)) log.nccl_version = m[1].str();
    const auto tok = split_ws(line);
    if (tok.empty()) continue;
    if (tok[0] == "#") {
      if (tok.size() > 3 && tok[1] == "size" && tok[2] == "count") header.assign(tok.begin() + 1, tok.end());
      continue;
    }
    if (tok[0][0] == '#') continue;
    double size = 0;
    if (!parse_double(tok[0], size)) continue;  // NCCL INFO lines and the like
    rows.emplace_back(lineno, tok);
  }
  if (!kind) fail(name, 0, "cannot tell the collective: no \"Collective test starting\" line; pass --collective");
  const int ranks = hints.ranks ? *hints.ranks : rank_lines;
  if (ranks < 1) fail(name, 0, "no \"#  Rank\" device lines; pass --ranks");
  const int nodes = hosts.size() > 1 ? static_cast<int>(hosts.size()) : hints.nodes;
  if (header.empty()) fail(name, 0, "no nccl-tests header line \"#  size  count  type ...\"");
  const auto time_it = std::find(header.begin(), header.end(), "time");
  if (time_it == header.end()) fail(name, 0, "the header has no \"time\" column");
  const auto time_col = static_cast<std::size_t>(time_it - header.begin());
  for (const auto& [ln, tok] : rows) {
    double bytes = 0, t = 0;
    if (tok.size() <= time_col || !parse_double(tok[0], bytes) || !parse_double(tok[time_col], t) || t <= 0) {
      fail(name, ln, fmt::format("expected a row with a time in column {} (\"{}\")", time_col + 1, fmt::join(tok, " ")));
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

CollectiveLog parse_collective_log_text(const std::string& text, const std::string& name, const LogHints& hints) {
  // A CSV table starts with "size" and has commas in its first line.
  const auto first_nl = text.find('\n');
  const std::string first = lower(text.substr(0, first_nl));
  if (first.rfind("size", 0) == 0 && first.find(',') != std::string::npos) return parse_csv(text, name, hints);
  return parse_nccl_tests(text, name, hints);
}

CollectiveLog parse_collective_log(const std::string& path, const LogHints& hints) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "", "cannot open the file");
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_collective_log_text(buf.str(), path, hints);
}

}  // namespace perfcast
