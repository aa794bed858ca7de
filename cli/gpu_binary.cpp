#include "cli/gpu_binary.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

namespace perfcast::cli {
namespace {

std::vector<char*>& command_line() {
  static std::vector<char*> argv;
  return argv;
}

/// True in perfcast-gpu itself (cli/CMakeLists.txt): it never hands a command on.
constexpr bool kIsGpuBinary =
#if PERFCAST_GPU_COMMANDS_ONLY
    true;
#else
    false;
#endif

}  // namespace

void remember_command_line(int argc, char** argv) { command_line().assign(argv, argv + argc); }

std::string gpu_binary_path() {
  if (kIsGpuBinary) return "";
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path gpu = self.parent_path() / "perfcast-gpu";
  return std::filesystem::is_regular_file(gpu, ec) && ::access(gpu.c_str(), X_OK) == 0 ? gpu.string() : "";
}

std::string run_gpu_binary() {
  const std::string path = gpu_binary_path();
  if (path.empty()) {
    return kIsGpuBinary ? "this executable has no CUDA"
                        : "this build has no CUDA (perfcast-gpu, the GPU commands' executable, is built when CMake "
                          "finds nvcc: configure with -DPERFCAST_ENABLE_CUDA=ON on a machine with the CUDA toolkit)";
  }
  std::vector<char*> argv = command_line();
  if (argv.empty()) return "the command line was not recorded";
  argv[0] = const_cast<char*>(path.c_str());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(path.c_str(), argv.data());
  return fmt::format("cannot start {}: {}", path, std::strerror(errno));
}

}  // namespace perfcast::cli
