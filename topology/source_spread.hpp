#pragma once
/// \file source_spread.hpp
/// How far measured tables of the same hardware disagree with each other, which bounds
/// what any collective model can reach on a source left out of its fit.
///
/// For a source A and the other sources B, at every size A shares with some B (same
/// collective, rank count, node count and byte count), the spread is |t_B / t_A - 1| for
/// the B closest to A: the error on A of a model that reproduced B exactly. Its geomean
/// (sizes >= 1 MiB) and maximum (sizes >= 64 KiB) sit beside the leave-one-source-out
/// errors of `perfcast calibrate comms`. The minimax bound |t_A - t_B| / (t_A + t_B) is the
/// smallest error any single prediction can have on both A and B at that size.

#include <string>
#include <vector>

#include "topology/nccl_tests_parser.hpp"

namespace perfcast {

struct SourceSpread {
  std::size_t shared_sizes = 0;          ///< sizes >= 64 KiB that A shares with another source
  std::size_t shared_from_1MiB = 0;      ///< of them, >= 1 MiB
  double geomean_from_1MiB = 0;          ///< geomean |t_B / t_A - 1| over sizes >= 1 MiB
  double max_from_64KiB = 0;             ///< max |t_B / t_A - 1| over sizes >= 64 KiB
  double minimax_geomean_from_1MiB = 0;  ///< geomean of |t_A - t_B| / (t_A + t_B), sizes >= 1 MiB
  double minimax_max_from_64KiB = 0;     ///< max of the same from 64 KiB
};

/// Spread of `mine` (one source's samples) against `others` (every other source's). Samples
/// below 64 KiB are ignored; an empty result (shared_sizes 0) when no size is shared.
[[nodiscard]] SourceSpread source_spread(const std::vector<CollectiveSample>& mine, const std::vector<CollectiveSample>& others);

}  // namespace perfcast
