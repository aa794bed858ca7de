#pragma once
/// \file csv_record.hpp
/// One record of a CSV table (RFC 4180 quoting: "..." with "" for a quote), for the public
/// measurement tables perfcast reads, whose records never span lines.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace perfcast {

/// The fields of `line`; a carriage return outside quotes is dropped.
[[nodiscard]] std::vector<std::string> split_csv_record(const std::string& line);

/// `text` without leading and trailing blanks (space, tab, carriage return, newline).
[[nodiscard]] std::string trim_blanks(const std::string& text);

/// Column name (trimmed) -> index of a header record. Throws ConfigError(file, `where`) for a
/// name given twice: readers check each record's field count against the header's and index
/// fields by these positions, which a repeated name would leave beyond the record's end.
[[nodiscard]] std::map<std::string, std::size_t> csv_header_columns(const std::vector<std::string>& header,
                                                                    const std::string& file, const std::string& where = "line 1");

}  // namespace perfcast
