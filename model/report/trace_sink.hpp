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

/// Appends `s` as a JSON string literal.
inline void append_json_string(fmt::memory_buffer& b, std::string_view s) {
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
