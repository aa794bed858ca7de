#include "core/input_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "core/limits.hpp"

namespace perfcast {
namespace {

/// Closes a descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

std::string too_large(std::uint64_t limit) {
  return fmt::format("the file is larger than {} bytes, the most perfcast reads (core/limits.hpp)", limit);
}

}  // namespace

InputPathStatus input_path_status(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  InputPathStatus out;
  out.type = st.type();
  // status() reports a missing path as not_found with an error code set; that is an answer.
  if (ec && out.type != std::filesystem::file_type::not_found) out.error = ec.message();
  if (ec && out.type == std::filesystem::file_type::none) out.type = std::filesystem::file_type::not_found;
  return out;
}

std::string read_input_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  const std::uint64_t limit = max_bytes == 0 ? limits::kMaxInputFileBytes : max_bytes;
  const std::string name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ConfigError(name, "", fmt::format("cannot open the file: {}", std::strerror(errno)));
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw ConfigError(name, "", fmt::format("cannot read the file: {}", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw ConfigError(name, "", "is a directory; expected a file");
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    throw ConfigError(name, "", "is a device or socket; expected a regular file or a pipe");
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > limit) throw ConfigError(name, "", too_large(limit));
  // Back to blocking reads (O_NONBLOCK only kept open() of a FIFO without writer from hanging).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string bytes;
  if (S_ISREG(st.st_mode)) bytes.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw ConfigError(name, "", fmt::format("cannot read the file: {}", std::strerror(errno)));
    if (r == 0) break;
    if (bytes.size() + static_cast<std::size_t>(r) > limit) throw ConfigError(name, "", too_large(limit));
    bytes.append(buf, static_cast<std::size_t>(r));
  }
  return bytes;
}

std::optional<std::size_t> first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte (RFC 3629 table)
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return i;
    if (i + len > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    i += len;
  }
  return std::nullopt;
}

TextPosition position_of(std::string_view text, std::size_t offset) {
  TextPosition pos;
  const std::size_t end = std::min(offset, text.size());
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else {
      ++pos.column;
    }
  }
  return pos;
}

void require_utf8(std::string_view text, const std::string& file) {
  const auto bad = first_invalid_utf8(text);
  if (!bad) return;
  const TextPosition pos = position_of(text, *bad);
  throw ConfigError(file, fmt::format("line {}", pos.line),
                    fmt::format("invalid UTF-8 at column {} (byte 0x{:02x}); expected UTF-8 text", pos.column,
                                static_cast<unsigned char>(text[*bad])));
}

}  // namespace perfcast
