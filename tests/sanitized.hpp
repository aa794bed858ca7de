#pragma once
/// \file sanitized.hpp
/// Whether the test binary runs under AddressSanitizer (PERFCAST_SANITIZE, CI's sanitizer
/// stage). There the large sweeps and data fits run a smaller share, enough to run their code
/// under the sanitizers; the optimized build checks all of it.

namespace perfcast::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace perfcast::test
