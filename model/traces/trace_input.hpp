#pragma once
/// \file trace_input.hpp
/// Reads the bytes of profiler traces as users hand them over: a plain JSON file, a
/// gzip-compressed one (`.json.gz`, detected by the gzip magic bytes, not the name), or a
/// tar archive (`.tar.gz`, `.tgz`, `.tar`) holding several rank traces, as the PARAM
/// DLRM traces are packed. Everything is read in-process: gzip with zlib, tar with
/// libarchive, streaming each member; member names are labels only (never a path written
/// to, never an argument to a program).
///
/// Bounds (core/limits.hpp): each input file and everything decompressed from one input
/// is at most limits::kMaxInputFileBytes; memory is the compressed file plus its members.
///
/// Errors: a missing, unreadable or oversized file, a damaged gzip stream or archive, or
/// an archive without JSON members is bad input: ConfigError naming the file (and member).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace perfcast {

/// One trace document as text, and the name to show for it in messages and reports:
/// the path, or "ARCHIVE:MEMBER" for a member of an archive.
struct TraceText {
  std::string name;
  std::string text;
};

/// Reads every input; an archive contributes its `*.json` and `*.json.gz` members in
/// name order. Throws ConfigError for bad input.
[[nodiscard]] std::vector<TraceText> read_trace_inputs(const std::vector<std::string>& paths);

/// gzip streams start with 0x1f 0x8b (RFC 1952 section 2.3.1).
[[nodiscard]] bool is_gzip(std::string_view bytes);

/// Decompresses gzip data (zlib): every member of a multi-member file (`cat a.gz b.gz`,
/// bgzip) in order; bytes after the last member that are not a gzip member are an error.
/// `name` is used in errors. Refuses output over `budget` bytes (default
/// limits::kMaxInputFileBytes) and takes what it produced off `budget`, so that the members
/// of one archive share one limit.
[[nodiscard]] std::string gunzip(std::string_view bytes, const std::string& name, std::uint64_t* budget = nullptr);

}  // namespace perfcast
