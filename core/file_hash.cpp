#include "core/file_hash.hpp"

#include <cstdint>
#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace perfcast {

std::string file_fnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a 64 offset basis
  std::vector<char> buf(1 << 16);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[static_cast<std::size_t>(i)]);
      h *= 1099511628211ULL;  // FNV-1a 64 prime
    }
  }
  return fmt::format("{:016x}", h);
}

}  // namespace perfcast
