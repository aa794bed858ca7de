#pragma once
// Shared by the libFuzzer targets: the contract every reader is held to. Bad input may
// only raise ConfigError (the CLI's exit 2, naming the place); anything else (another
// exception, a crash, a sanitizer report, a non-finite time) is a finding and aborts.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "core/deadline.hpp"
#include "core/json_reader.hpp"

namespace perfcast::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// Runs `f`; ConfigError is the expected answer to bad input, and DeadlineExceeded the end
/// of work that a target bounds in time (core/deadline.hpp); any other exception aborts.
template <class F>
void only_config_errors(F&& f) {
  try {
    f();
  } catch (const ConfigError&) {
  } catch (const DeadlineExceeded&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: exception other than ConfigError: %s\n", e.what());
    std::abort();
  }
}

/// Aborts unless `t` is a finite time >= 0 (seconds).
inline void require_finite_time(double t, const char* what) {
  if (!std::isfinite(t) || t < 0) {
    std::fprintf(stderr, "finding: %s is %g\n", what, t);
    std::abort();
  }
}

/// A per-process scratch file for readers that take a path; rewritten for every input.
inline std::string scratch_file(std::string_view suffix, const std::string& bytes) {
  const std::string path = "/tmp/perfcast_fuzz_" + std::to_string(::getpid()) + std::string(suffix);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

}  // namespace perfcast::fuzz
