#include "core/utc_time.hpp"

#include <chrono>
#include <ctime>

namespace perfcast {

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string utc_today() { return utc_now_iso8601().substr(0, 10); }  // YYYY-MM-DD of the ISO 8601 stamp

}  // namespace perfcast
