#pragma once
/// \file units.hpp
/// SI units inside the program; strings such as "900GB/s", "5us", "80GiB" are parsed
/// here, once, at the edge. Decimal prefixes are powers of 1000, binary prefixes (Ki, Mi,
/// Gi, Ti) powers of 1024; "b" is a bit and "B" a byte.

#include <string>
#include <string_view>

namespace perfcast {

using Seconds = double;         ///< time in seconds
using Bytes = double;           ///< size in bytes
using BytesPerSecond = double;  ///< bandwidth in bytes/s
using FlopsPerSecond = double;  ///< arithmetic rate in FLOP/s
using Hertz = double;           ///< clock in 1/s

/// What a quantity string must measure.
enum class Dimension { kTime, kBytes, kBandwidth, kFlopRate, kFrequency };

/// Example of a valid string of that dimension, used in error messages.
[[nodiscard]] std::string_view dimension_example(Dimension d);
[[nodiscard]] std::string_view dimension_name(Dimension d);

/// Parses "<number><unit>" into SI (seconds, bytes, bytes/s, FLOP/s, Hz).
/// Accepted units:
///   time:      s, ms, us, ns
///   bytes:     B, KB, MB, GB, TB, KiB, MiB, GiB, TiB
///   bandwidth: B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, b/s, Kb/s, Mb/s, Gb/s, Tb/s
///   flop rate: FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s
///   frequency: Hz, KHz, MHz, GHz
/// The value in SI must lie in the dimension's range stated in core/limits.hpp (0 is
/// allowed for times and sizes), so no product or quotient of two quantities is a
/// denormal or an infinity. Throws std::invalid_argument with a message that names the
/// expected unit.
[[nodiscard]] double parse_quantity(std::string_view text, Dimension expected);

/// Formats seconds for humans: "1.234 ms", "56.7 us".
[[nodiscard]] std::string format_time(Seconds s);
/// Formats bytes with binary prefixes: "1.50 GiB".
[[nodiscard]] std::string format_bytes(Bytes b);

}  // namespace perfcast
