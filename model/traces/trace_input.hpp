#pragma once
/// \file trace_input.hpp
/// Reads the bytes of profiler traces as users hand them over: a plain JSON file, a
/// gzip-compressed one (`.json.gz`, detected by the gzip magic bytes, not the name), or a
/// tar archive (`.tar.gz`, `.tgz`, `.tar`) holding several rank traces, as the PARAM
/// DLRM traces are packed. Decompression runs the system's `gzip -dc` and `tar -xzOf` /
/// `tar -tzf` through posix_spawn and pipes (both are in every Debian base image); no
/// compression library is linked.
///
/// Errors: a missing or unreadable file, a failing `gzip`/`tar` (corrupt archive) or an
/// archive without JSON members is bad input: ConfigError naming the file. A `gzip` or
/// `tar` that cannot be started at all is std::runtime_error (the machine, not the input).

#include <string>
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

/// Output of a finished child process.
struct ProcessResult {
  int exit_code = 0;     ///< exit status; 128 + signal number when a signal ended it
  std::string out;       ///< everything it wrote to standard output
  std::string err;       ///< everything it wrote to standard error
};

/// Runs `argv` (argv[0] looked up in PATH) with `input` on its standard input and
/// collects its outputs (poll-driven, so large outputs cannot deadlock). Throws
/// std::runtime_error when the program cannot be started.
[[nodiscard]] ProcessResult run_process(const std::vector<std::string>& argv, const std::string& input = {});

}  // namespace perfcast
