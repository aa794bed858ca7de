#include "core/staged_output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "core/json_reader.hpp"

namespace perfcast {
namespace {

namespace fs = std::filesystem;

/// The process's file-creation mask, read without changing it (/proc/self/status, Linux
/// 4.7+); 022 where it cannot be read. Staging files are created 0600 by mkostemp and get
/// the mode an ordinary new file would have (0666 & ~umask) before they are renamed.
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  }
  return 022;
}

/// "DIR/.NAME.perfcast-XXXXXX" as a mutable buffer for mkostemp / mkdtemp. Long names are
/// shortened so that the staging name stays within the file system's 255-byte limit.
std::vector<char> staging_template(const fs::path& target) {
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string name = target.filename().string();
  if (name.size() > 200) name.resize(200);
  const std::string t = (dir / ("." + name + ".perfcast-XXXXXX")).string();
  return std::vector<char>(t.begin(), t.end() + 1);  // with the terminating NUL
}

/// A path that cannot name an output (too long, in a folder that does not exist) is the
/// input's fault (ConfigError, exit 2); anything else (permissions, a full disk) the work's.
[[noreturn]] void fail(const fs::path& path, int error) {
  if (error == ENAMETOOLONG || error == ENOENT || error == ENOTDIR || error == EISDIR || error == ELOOP)
    throw ConfigError(path.string(), "", fmt::format("cannot be written: {}; expected a path to an output file in an "
                                                     "existing folder", std::strerror(error)));
  throw OutputError(fmt::format("cannot write {}: {}", path.string(), std::strerror(error)));
}

/// The staging files and folders of this process not yet committed or removed, so that a
/// process ended by its time limit can remove them (remove_uncommitted_staging).
struct StagingRegistry {
  std::mutex mutex;
  std::set<std::string> files, folders;
};

StagingRegistry& staging_registry() {
  static StagingRegistry r;
  return r;
}

void track(std::set<std::string> StagingRegistry::*which, const fs::path& p, bool live) {
  StagingRegistry& r = staging_registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (live) (r.*which).insert(p.string());
  else (r.*which).erase(p.string());
}

}  // namespace

void remove_uncommitted_staging() noexcept {
  StagingRegistry& r = staging_registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& f : r.files) ::unlink(f.c_str());
  for (const auto& d : r.folders) {
    std::error_code ec;
    fs::remove_all(d, ec);
  }
  r.files.clear();
  r.folders.clear();
}

// ---- StagedFile ------------------------------------------------------------------------

StagedFile::StagedFile(const fs::path& target) : target_(target) {
  if (target.empty() || target.filename().empty()) throw ConfigError(target.string(), "", "expected an output file name");
  std::vector<char> name = staging_template(target);
  fd_ = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd_ < 0) fail(target, errno);
  staging_ = fs::path(name.data());
  track(&StagingRegistry::files, staging_, true);
  if (::fchmod(fd_, 0666 & ~current_umask()) != 0) {
    const int e = errno;
    ::close(fd_);
    ::unlink(staging_.c_str());
    fd_ = -1;
    fail(target, e);
  }
}

StagedFile::~StagedFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !staging_.empty()) {
    ::unlink(staging_.c_str());
    track(&StagingRegistry::files, staging_, false);
  }
}

void StagedFile::write(std::string_view text) {
  if (fd_ < 0) throw OutputError("cannot write " + target_.string() + ": the file is closed");
  while (!text.empty()) {
    const ssize_t n = ::write(fd_, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(target_, errno);
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

void StagedFile::commit() {
  if (committed_) return;
  if (fd_ >= 0) {
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) fail(target_, errno);
  }
  if (std::rename(staging_.c_str(), target_.c_str()) != 0) fail(target_, errno);
  committed_ = true;
  track(&StagingRegistry::files, staging_, false);
}

// ---- StagedFolder ----------------------------------------------------------------------

StagedFolder::StagedFolder(const fs::path& target, const std::string& option,
                           const std::function<bool(const std::string&)>& owned)
    : target_(target) {
  if (target.empty()) throw ConfigError(option, "", "expected a folder name");
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(target, ec);
  if (fs::is_symlink(st)) throw ConfigError(option, target.string(), "is a link; expected a folder (links are not followed)");
  if (fs::exists(st) && !fs::is_directory(st)) throw ConfigError(option, target.string(), "is a file; expected a folder");
  if (fs::is_directory(st)) {
    for (const auto& entry : fs::directory_iterator(target, ec)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_regular_file(ec) || entry.is_symlink(ec) || !owned(name)) {
        throw ConfigError(option, target.string(),
                          fmt::format("holds \"{}\", which perfcast did not write there; give a new or empty folder "
                                      "(the folder is replaced whole)", name));
      }
    }
    if (ec) fail(target, ec.value());
  }
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec) fail(parent, ec.value());
  std::vector<char> name = staging_template(target);
  if (::mkdtemp(name.data()) == nullptr) fail(target, errno);
  staging_ = fs::path(name.data());
  track(&StagingRegistry::folders, staging_, true);
  ::chmod(staging_.c_str(), 0777 & ~current_umask());
}

StagedFolder::~StagedFolder() {
  if (committed_ || staging_.empty()) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
  track(&StagingRegistry::folders, staging_, false);
}

void StagedFolder::commit() {
  if (committed_) return;
  std::error_code ec;
  // From here the staging name is the target's or the earlier folder's; never removed by
  // remove_uncommitted_staging (a failure below puts things back and throws).
  track(&StagingRegistry::folders, staging_, false);
  if (!fs::exists(fs::symlink_status(target_, ec))) {
    if (std::rename(staging_.c_str(), target_.c_str()) != 0) fail(target_, errno);
    committed_ = true;
    return;
  }
  // Swap the two names in one step, then remove the earlier folder (now at the staging name).
  if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
    committed_ = true;
    fs::remove_all(staging_, ec);
    return;
  }
  // No exchange on this file system: move the earlier folder onto an empty placeholder,
  // the staged one into place, then remove the earlier one.
  std::vector<char> old = staging_template(target_);
  if (::mkdtemp(old.data()) == nullptr) fail(target_, errno);
  if (std::rename(target_.c_str(), old.data()) != 0) {
    const int e = errno;
    ::rmdir(old.data());
    fail(target_, e);
  }
  if (std::rename(staging_.c_str(), target_.c_str()) != 0) {
    const int e = errno;
    std::rename(old.data(), target_.c_str());  // put the earlier folder back
    fail(target_, e);
  }
  committed_ = true;
  fs::remove_all(fs::path(old.data()), ec);
}

// ---- standard output -------------------------------------------------------------------

void write_stdout(std::string_view text) {
  std::cout.flush();
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    throw OutputError(fmt::format("cannot write standard output: {}", std::strerror(errno)));
  }
}

bool flush_stdout() {
  std::cout.flush();
  const bool cpp_ok = std::cout.good();
  return std::fflush(stdout) == 0 && std::ferror(stdout) == 0 && cpp_ok;
}

}  // namespace perfcast
