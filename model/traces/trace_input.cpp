#include "model/traces/trace_input.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/json_reader.hpp"

extern char** environ;

namespace perfcast {
namespace {

/// Closes a descriptor once.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

void make_pipe(Fd& read_end, Fd& write_end) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  read_end.fd = p[0];
  write_end.fd = p[1];
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// gzip streams start with 0x1f 0x8b (RFC 1952 section 2.3.1).
bool is_gzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "", "cannot open the file");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ConfigError(path, "", "cannot read the file");
  return bytes;
}

std::string first_line(const std::string& s) {
  const auto nl = s.find('\n');
  return s.substr(0, nl == std::string::npos ? s.size() : nl);
}

/// Runs a decompressing tool; a non-zero exit is a damaged input.
std::string run_tool(const std::vector<std::string>& argv, const std::string& input, const std::string& name) {
  ProcessResult r = run_process(argv, input);
  if (r.exit_code != 0) {
    throw ConfigError(name, "",
                      fmt::format("{} failed (exit {}): {}", argv[0], r.exit_code,
                                  r.err.empty() ? "no message" : first_line(r.err)));
  }
  return std::move(r.out);
}

std::string gunzip(const std::string& bytes, const std::string& name) {
  return run_tool({"gzip", "-dc"}, bytes, name);
}

bool is_archive(const std::string& path) {
  return ends_with(path, ".tar.gz") || ends_with(path, ".tgz") || ends_with(path, ".tar");
}

void read_archive(const std::string& path, std::vector<TraceText>& out) {
  {
    std::ifstream probe(path, std::ios::binary);
    if (!probe) throw ConfigError(path, "", "cannot open the file");
  }
  const std::string flags = ends_with(path, ".tar") ? "-tf" : "-tzf";
  std::istringstream listing(run_tool({"tar", flags, path}, {}, path));
  std::vector<std::string> members;
  for (std::string line; std::getline(listing, line);) {
    if (ends_with(line, ".json") || ends_with(line, ".json.gz")) members.push_back(line);
  }
  std::sort(members.begin(), members.end());
  if (members.empty()) throw ConfigError(path, "", "the archive holds no *.json or *.json.gz member");
  const std::string extract = ends_with(path, ".tar") ? "-xOf" : "-xzOf";
  for (const auto& m : members) {
    const std::string name = path + ":" + m;
    std::string bytes = run_tool({"tar", extract, path, m}, {}, name);
    if (is_gzip(bytes)) bytes = gunzip(bytes, name);
    out.push_back({name, std::move(bytes)});
  }
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& input) {
  if (argv.empty()) throw std::invalid_argument("run_process: empty argv");
  Fd in_r, in_w, out_r, out_w, err_r, err_w;
  make_pipe(in_r, in_w);
  make_pipe(out_r, out_w);
  make_pipe(err_r, err_w);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_r.fd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, STDERR_FILENO);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)));
  in_r.reset();
  out_w.reset();
  err_w.reset();

  // Writing to a child that exited early must give EPIPE, not kill this process.
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);

  ProcessResult result;
  std::size_t written = 0;
  if (input.empty()) in_w.reset();
  char buf[1 << 16];
  while (out_r.fd >= 0 || err_r.fd >= 0) {
    pollfd fds[3];
    nfds_t n = 0;
    if (out_r.fd >= 0) fds[n++] = {out_r.fd, POLLIN, 0};
    if (err_r.fd >= 0) fds[n++] = {err_r.fd, POLLIN, 0};
    if (in_w.fd >= 0) fds[n++] = {in_w.fd, POLLOUT, 0};
    if (::poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_w.fd) {
        const ssize_t w = ::write(in_w.fd, input.data() + written, std::min<std::size_t>(input.size() - written, 1 << 16));
        if (w > 0) written += static_cast<std::size_t>(w);
        if (w < 0 && errno != EINTR && errno != EAGAIN) written = input.size();  // child closed its input
        if (written >= input.size()) in_w.reset();
        continue;
      }
      Fd& src = fds[i].fd == out_r.fd ? out_r : err_r;
      std::string& dst = fds[i].fd == out_r.fd ? result.out : result.err;
      const ssize_t r = ::read(src.fd, buf, sizeof buf);
      if (r > 0) dst.append(buf, static_cast<std::size_t>(r));
      else if (r == 0 || (errno != EINTR && errno != EAGAIN)) src.reset();
    }
  }
  in_w.reset();
  ::sigaction(SIGPIPE, &previous, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

std::vector<TraceText> read_trace_inputs(const std::vector<std::string>& paths) {
  std::vector<TraceText> out;
  for (const auto& path : paths) {
    if (is_archive(path)) {
      read_archive(path, out);
      continue;
    }
    std::string bytes = read_file(path);
    if (is_gzip(bytes)) bytes = gunzip(bytes, path);
    out.push_back({path, std::move(bytes)});
  }
  return out;
}

}  // namespace perfcast
