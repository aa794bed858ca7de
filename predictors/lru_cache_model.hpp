#pragma once
/// \file lru_cache_model.hpp
/// Hit rate of an LRU row cache (such as FBGEMM's UVM-caching embedding cache in HBM) for a
/// table whose lookups follow an IndexDistribution, by Che's approximation.
///
/// Model: lookups are independent draws (the independent reference model) with row i
/// drawn with probability p_i. Che's approximation (Che, Tung, Wang, IEEE JSAC 2002;
/// shown asymptotically exact for Zipf by Fricker, Robert, Roberts, ITC 2012): an LRU
/// cache of C rows keeps a row for a characteristic time T (in lookups) that solves
///   sum_i (1 - exp(-p_i T)) = C,
/// and the hit rate is sum_i p_i (1 - exp(-p_i T)). A W-way set-associative cache with
/// rows hashed to C/W sets is treated as fully associative: each set sees a random
/// sample of rows with the same popularity profile, so its T is the same (the exact
/// simulation in tests/predictors/lru_cache_model_test.cpp measures what this omits).

#include "predictors/index_distribution.hpp"

namespace perfcast {

/// Expected LRU hit rate in [0, 1] of a cache holding `cache_rows` of a table's `rows`
/// under distribution `d` (uniform: cache_rows / rows exactly). A reuse histogram (one
/// batch's statistics) is first turned into the Zipf exponent with the same expected
/// unique rows for `accesses_per_batch` lookups (fit_zipf_alpha). Contract: 0 for
/// cache_rows <= 0, 1 for cache_rows >= rows, non-decreasing in cache_rows.
[[nodiscard]] double lru_hit_rate(const IndexDistribution& d, double rows, double cache_rows, double accesses_per_batch = 0);

}  // namespace perfcast
