#pragma once
/// \file trace_sink.hpp
/// Where the trace writers stream their text: a plain or gzip file, or a string, through a
/// 1 MiB buffer (memory stays one buffer, whatever the trace's size), and JSON string
/// escaping for the hand-formatted events.

#include <cstdio>
#include <string>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

namespace perfcast {

/// Length of the well-formed UTF-8 sequence starting at s[i] (1 to 4 bytes), or 0 where the
/// bytes there are not one (RFC 3629 table 3-7: no overlong forms, surrogates, or code
/// points beyond U+10FFFF).
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = at(0);
  const auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return at(k) >= lo && at(k) <= hi; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/// Appends `s` as a JSON string literal. A byte that does not start a well-formed UTF-8
/// sequence (a name from a log or a file name with other bytes) is written as U+FFFD, as
/// json_text (core/json_text.hpp) does, so that a trace is always valid JSON.
inline void append_json_string(fmt::memory_buffer& b, std::string_view s) {
  b.push_back('"');
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      const std::size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        b.append(std::string_view("\ufffd"));
      } else {
        b.append(s.substr(i, n));
        i += n - 1;
      }
      continue;
    }
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
    else f_ = std::fopen(path.c_str(), "wbx");  // "x": never an existing file or link
    if (gz_ == nullptr && f_ == nullptr) throw std::runtime_error("cannot write " + path);
  }
  /// Writes to `fd` (the sink closes it), e.g. a dup() of a StagedFile's descriptor;
  /// `path` names the target in errors.
  TraceSink(int fd, const std::string& path, bool gzip) : path_(path), gzip_(gzip) {
    if (gzip_) gz_ = gzdopen(fd, "wb6");
    else f_ = fdopen(fd, "wb");
    if (gz_ == nullptr && f_ == nullptr) {
      ::close(fd);
      throw std::runtime_error("cannot write " + path);
    }
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

}  // namespace perfcast
