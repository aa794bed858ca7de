#pragma once
/// \file input_file.hpp
/// Reading user files whole, with the bounds of core/limits.hpp: a directory, a device
/// (/dev/zero) or a file over limits::kMaxInputFileBytes is refused before reading; a
/// pipe is read up to that size. Memory used is the file's size plus one read buffer.
/// Also checks for text that must be UTF-8 (logs whose strings reach JSON outputs).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace perfcast {

/// The bytes of `path`. Throws ConfigError naming the file when it is missing,
/// unreadable, a directory or a device, or larger than `max_bytes`.
[[nodiscard]] std::string read_input_file(const std::filesystem::path& path,
                                          std::uint64_t max_bytes = 0 /* 0: limits::kMaxInputFileBytes */);

/// What a path names, looked up without throwing (std::filesystem::status with an
/// error code). `error` is empty unless the system refused to look (a name too long, a
/// loop of links, a denied search); a missing path is type not_found with no error.
struct InputPathStatus {
  std::filesystem::file_type type = std::filesystem::file_type::not_found;
  std::string error;
  [[nodiscard]] bool exists() const { return error.empty() && type != std::filesystem::file_type::not_found; }
  [[nodiscard]] bool regular() const { return error.empty() && type == std::filesystem::file_type::regular; }
};
[[nodiscard]] InputPathStatus input_path_status(const std::filesystem::path& path);

/// Offset of the first byte that is not part of a well-formed UTF-8 sequence
/// (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF), or nullopt.
[[nodiscard]] std::optional<std::size_t> first_invalid_utf8(std::string_view text);

/// 1-based line and column of byte `offset` in `text`.
struct TextPosition {
  std::size_t line = 1, column = 1;
};
[[nodiscard]] TextPosition position_of(std::string_view text, std::size_t offset);

/// Throws ConfigError("FILE", "line L", "invalid UTF-8 at column C ...") for text that is
/// not UTF-8.
void require_utf8(std::string_view text, const std::string& file);

}  // namespace perfcast
