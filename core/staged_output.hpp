#pragma once
/// \file staged_output.hpp
/// The one way perfcast writes a file or a folder: whole or not at all, never through a
/// link, never mixed with what an earlier or concurrent run left.
///
/// Contract (docs/robustness.md, "Outputs"):
///  - A file is written to a staging file created exclusively (O_CREAT | O_EXCL, so never an
///    existing file or a planted link) under an unpredictable name in the target's folder
///    (`.NAME.perfcast-XXXXXX`, mkostemp), then renamed over the target by commit(). rename()
///    replaces a link at the target itself; it never writes where the link points.
///  - A folder is staged as a new folder beside the target (mkdtemp) and swapped in whole by
///    commit(): none of an earlier run's files stays. An existing target folder may hold only
///    files the writer owns (e.g. rank<N>.json); anything else is refused before writing.
///  - Whatever is not committed is removed when the object is destroyed (an exception, a
///    failed write). Two runs never share a staging name.
///  - Standard output is written with write_stdout, which reports a failed write (a full
///    disk, a closed pipe) instead of ignoring it.

#include <cstdio>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace perfcast {

/// An output that could not be written (permissions, a full disk, a closed pipe): the work
/// failed (exit 1), not the input.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A file written beside `target` and renamed over it by commit(). Throws OutputError when
/// the staging file cannot be created.
class StagedFile {
 public:
  explicit StagedFile(const std::filesystem::path& target);
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile();

  /// The open staging file's descriptor (for gzdopen: pass it a dup()).
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] const std::filesystem::path& staging_path() const { return staging_; }
  [[nodiscard]] const std::filesystem::path& target() const { return target_; }
  /// Appends `text`; throws OutputError on a failed write.
  void write(std::string_view text);
  /// Closes the staging file and renames it over the target; throws OutputError on failure
  /// (the staging file is removed).
  void commit();

 private:
  std::filesystem::path target_, staging_;
  int fd_ = -1;
  bool committed_ = false;
};

/// A folder written beside `target` and swapped in whole by commit(). `owned(name)` says
/// which files of an existing `target` folder an earlier run of the same writer wrote; a
/// target holding anything else (or a file at `target`) is a ConfigError naming `option`.
class StagedFolder {
 public:
  StagedFolder(const std::filesystem::path& target, const std::string& option,
               const std::function<bool(const std::string&)>& owned);
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  ~StagedFolder();

  /// The staging folder: write the files here (each a StagedFile, or directly).
  [[nodiscard]] const std::filesystem::path& path() const { return staging_; }
  /// Replaces the target by the staged folder (atomically where the kernel can exchange two
  /// names, renameat2), then removes the earlier folder. Throws OutputError on failure.
  void commit();

 private:
  std::filesystem::path target_, staging_;
  bool committed_ = false;
};

/// Removes every staging file and folder of this process not yet committed. For a process
/// about to end without unwinding (the time limit of cli/main.cpp); safe from any thread.
void remove_uncommitted_staging() noexcept;

/// Writes `text` to standard output and flushes it; throws OutputError when that fails.
void write_stdout(std::string_view text);

/// Flushes standard output (C and C++ streams) and reports whether everything written to it
/// so far reached it: false after a failed write.
[[nodiscard]] bool flush_stdout();

}  // namespace perfcast
