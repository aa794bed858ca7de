#pragma once
/// \file csv_record.hpp
/// One record of a CSV table (RFC 4180 quoting: "..." with "" for a quote), for the public
/// measurement tables perfcast reads, whose records never span lines.

#include <string>
#include <vector>

namespace perfcast {

/// The fields of `line`; a carriage return outside quotes is dropped.
[[nodiscard]] std::vector<std::string> split_csv_record(const std::string& line);

/// `text` without leading and trailing blanks (space, tab, carriage return, newline).
[[nodiscard]] std::string trim_blanks(const std::string& text);

}  // namespace perfcast
