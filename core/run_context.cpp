#include "core/run_context.hpp"

#include <fstream>

#include "core/file_hash.hpp"
#include "core/utc_time.hpp"
#include "perfcast/build_info.hpp"

namespace perfcast {

nlohmann::json command_context(const std::string& command, const std::vector<std::string>& inputs,
                               const std::vector<std::string>& overrides) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : inputs) {
    std::ifstream in(f, std::ios::binary | std::ios::ate);
    files.push_back({{"file", f}, {"bytes", in ? static_cast<long long>(in.tellg()) : -1}, {"fnv1a64", file_fnv1a64(f)}});
  }
  return {{"perfcast_version", build_info::kVersion}, {"git_commit", build_info::kGitCommit}, {"date", utc_now_iso8601()},
          {"command", command}, {"inputs", files}, {"overrides", overrides}};
}

}  // namespace perfcast
