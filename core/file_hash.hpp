#pragma once
/// \file file_hash.hpp
/// Content hashes that output `context` blocks record for their input files, so a result
/// can be matched to the exact files it came from. FNV-1a 64-bit: not cryptographic, a
/// fingerprint for provenance.

#include <string>

namespace perfcast {

/// FNV-1a 64-bit hash of the file's bytes as 16 hex digits; "" when it cannot be read.
[[nodiscard]] std::string file_fnv1a64(const std::string& path);

}  // namespace perfcast
