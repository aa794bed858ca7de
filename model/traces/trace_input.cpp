#include "model/traces/trace_input.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>
#include <zlib.h>

#include "core/input_file.hpp"
#include "core/json_reader.hpp"
#include "core/limits.hpp"

namespace perfcast {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string too_large_message() {
  return fmt::format("decompresses to more than {} bytes, the most perfcast reads (core/limits.hpp)",
                     limits::kMaxInputFileBytes);
}

bool is_archive(const std::string& path) {
  return ends_with(path, ".tar.gz") || ends_with(path, ".tgz") || ends_with(path, ".tar");
}

bool is_trace_member(const std::string& member) { return ends_with(member, ".json") || ends_with(member, ".json.gz"); }

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};

/// libarchive's message for the last error; it may have none (a null pointer).
std::string archive_message(archive* a) {
  const char* m = archive_error_string(a);
  return m ? m : "no detail given";
}

/// Reads the current member's data, streaming, refusing more than `budget` bytes in all.
std::string read_member(archive* a, const std::string& name, std::uint64_t& budget) {
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const la_ssize_t r = archive_read_data(a, buf, sizeof buf);
    if (r < 0) throw ConfigError(name, "", fmt::format("damaged archive member: {}", archive_message(a)));
    if (r == 0) break;
    if (static_cast<std::uint64_t>(r) > budget) throw ConfigError(name, "", too_large_message());
    budget -= static_cast<std::uint64_t>(r);
    bytes.append(buf, static_cast<std::size_t>(r));
  }
  return bytes;
}

/// Members of a tar archive (plain or gzip-compressed), read in-process with libarchive.
/// Member names are only labels: nothing is extracted to disk or passed to a program.
void read_archive(const std::string& path, std::vector<TraceText>& out) {
  const std::string bytes = read_input_file(path);
  std::unique_ptr<archive, ArchiveCloser> a(archive_read_new());
  if (!a) throw std::runtime_error("libarchive: out of memory");
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_none(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_format_gnutar(a.get());
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    throw ConfigError(path, "", fmt::format("not a tar archive: {}", archive_message(a.get())));
  std::vector<TraceText> members;
  std::uint64_t budget = limits::kMaxInputFileBytes;
  for (;;) {
    archive_entry* entry = nullptr;
    const int rc = archive_read_next_header(a.get(), &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
      throw ConfigError(path, "", fmt::format("damaged tar archive: {}", archive_message(a.get())));
    const char* raw_name = archive_entry_pathname(entry);
    const std::string member = raw_name ? raw_name : "";
    if (archive_entry_filetype(entry) != AE_IFREG || !is_trace_member(member)) continue;
    if (first_invalid_utf8(member)) {
      throw ConfigError(path, "", "an archive member's name is not UTF-8; expected UTF-8 member names");
    }
    const std::string name = path + ":" + member;
    std::string data = read_member(a.get(), name, budget);
    if (is_gzip(data)) data = gunzip(data, name, &budget);  // the members share the archive's limit
    members.push_back({name, std::move(data)});
  }
  if (members.empty()) throw ConfigError(path, "", "the archive holds no *.json or *.json.gz member");
  std::sort(members.begin(), members.end(), [](const TraceText& x, const TraceText& y) { return x.name < y.name; });
  for (auto& m : members) out.push_back(std::move(m));
}

}  // namespace

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view bytes, const std::string& name, std::uint64_t* budget) {
  std::uint64_t own_budget = limits::kMaxInputFileBytes;
  std::uint64_t& left = budget ? *budget : own_budget;
  z_stream z{};
  // 16 + MAX_WBITS: gzip wrapper only (zlib.h, inflateInit2).
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("zlib: inflateInit2 failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  std::string out;
  char buf[1 << 16];
  std::size_t consumed = 0;  // bytes handed to zlib so far
  for (;;) {
    // Feed at most 1 GiB per call: avail_in is 32 bits.
    if (z.avail_in == 0 && consumed < bytes.size()) {
      const std::size_t chunk = std::min<std::size_t>(bytes.size() - consumed, 1U << 30);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + consumed));
      z.avail_in = static_cast<uInt>(chunk);
      consumed += chunk;
    }
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    const int rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && consumed == bytes.size())
      throw ConfigError(name, "", "truncated gzip stream");
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
      throw ConfigError(name, "", fmt::format("damaged gzip stream: {}", z.msg ? z.msg : "inflate failed"));
    const std::size_t produced = sizeof buf - z.avail_out;
    if (produced > left) throw ConfigError(name, "", too_large_message());
    left -= produced;
    out.append(buf, produced);
    if (rc != Z_STREAM_END) continue;
    // The end of one member: another may follow (RFC 1952 section 2.2).
    const std::size_t rest = z.avail_in + (bytes.size() - consumed);
    if (rest == 0) break;
    const std::string_view next = bytes.substr(bytes.size() - rest);
    if (!is_gzip(next)) throw ConfigError(name, "", fmt::format("{} bytes after the end of the gzip data are not a gzip member", rest));
    if (inflateReset(&z) != Z_OK) throw std::runtime_error("zlib: inflateReset failed");
  }
  return out;
}

std::vector<TraceText> read_trace_inputs(const std::vector<std::string>& paths) {
  std::vector<TraceText> out;
  for (const auto& path : paths) {
    if (is_archive(path)) {
      read_archive(path, out);
      continue;
    }
    std::string bytes = read_input_file(path);
    if (is_gzip(bytes)) bytes = gunzip(bytes, path);
    out.push_back({path, std::move(bytes)});
  }
  return out;
}

}  // namespace perfcast
