#pragma once
/// \file limits.hpp
/// The stated bounds on what perfcast reads. Every input is checked against these before
/// anything is allocated for it; a value outside them is bad input (ConfigError, exit 2)
/// whose message names the limit. The bounds are far above every real system, trace and
/// log we know of (configs/, data) and low enough that the work they allow is
/// bounded: quadratic structures stay under a few hundred MiB and every time stays finite.

#include <cstddef>
#include <cstdint>

namespace perfcast::limits {

/// Largest input file read into memory, in bytes (2 GiB). Larger files are refused
/// before reading; a stream (pipe) is cut off at this size with the same error.
inline constexpr std::uint64_t kMaxInputFileBytes = 2ULL << 30;

/// Deepest nesting of arrays and objects in any JSON input. Real inputs nest < 10 levels
/// (Kineto "Input Dims": 4); 128 keeps every recursive walk of a document far from the stack limit.
inline constexpr int kMaxJsonDepth = 128;

/// Longest line of a text log (nccl-tests, CSV tables, index-stats files), in bytes.
/// nccl-tests lines are < 200 bytes.
inline constexpr std::size_t kMaxTextLineBytes = 64 * 1024;

/// Most GPUs in one system (nodes x GPUs per node): what memory allows. A Transformer
/// prediction simulates one rank per distinct program (symmetric simulation) and keeps a
/// few hundred bytes for every other rank (its mirror entry, per-rank figures and memory
/// row, its place in its groups): about 0.75 KiB per GPU measured between 16,384 and 100,000
/// GPUs (docs/benchmarks.md), so 2^20 GPUs stay under 1 GiB. Workloads with per-pair structures
/// stop earlier (kMaxPairwiseRanks).
inline constexpr int kMaxGpus = 1 << 20;

/// Most ranks of a workload or collective with per-pair structures, quadratic in ranks
/// (DLRM all-to-allv byte matrices, imported traces, nccl-tests logs, comm --ranks):
/// 4,096^2 pairs x 8 B = 128 MiB.
inline constexpr int kMaxPairwiseRanks = 4096;

/// Most ranks in one collective read from a log or trace (nccl-tests logs, Kineto traces).
inline constexpr int kMaxRanks = kMaxPairwiseRanks;

/// Most embedding tables in one workload and most layers in one model.
inline constexpr int kMaxTables = 100000;
inline constexpr int kMaxLayers = 100000;

/// Largest embedding table (rows) and index value: 2^48 rows. Index sums and counts stay
/// exact in a double (< 2^53) and never overflow int64 at this bound.
inline constexpr std::int64_t kMaxRows = 1LL << 48;

/// Largest message or tensor size in bytes (1 PiB) and most sizes in one sweep.
inline constexpr double kMaxBytes = 1125899906842624.0;  // 2^50
inline constexpr int kMaxSweepSizes = 4096;

/// Range of physical quantities in SI units (zero is allowed for times, sizes and clocks,
/// not for bandwidths and FLOP rates).
/// Outside these a value is a typo or an attack, and products / quotients of two of
/// them could leave the range of a double (denormals, infinities).
inline constexpr double kMinTime = 1e-12, kMaxTime = 1e7;                // 1 ps .. 116 days
inline constexpr double kMinBytes = 1e-3, kMaxBytesQuantity = kMaxBytes;  // fractions of a byte appear in averages
inline constexpr double kMinBandwidth = 1e3, kMaxBandwidth = 1e16;       // 1 KB/s .. 10 PB/s
inline constexpr double kMinFlopRate = 1e6, kMaxFlopRate = 1e19;         // 1 MFLOP/s .. 10 EFLOP/s
inline constexpr double kMinFrequency = 1e3, kMaxFrequency = 1e12;       // 1 KHz .. 1 THz

/// Largest step number in a profiler trace (ProfilerStep#N) and other trace integers
/// (ids, streams, devices): kept below 2^53 so they are exact in a double as well.
inline constexpr std::int64_t kMaxTraceInteger = (1LL << 53) - 1;

/// Most nodes in one execution trace (PyTorch ET); dependency passes are linear in it.
inline constexpr std::size_t kMaxTraceNodes = 10'000'000;

}  // namespace perfcast::limits
