#include "cli/log.hpp"

#include <cstdio>

#include <unistd.h>

#include <stdexcept>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace perfcast::cli {
namespace {

std::shared_ptr<spdlog::logger>& logger_slot() {
  static std::shared_ptr<spdlog::logger> logger;
  return logger;
}

/// %* : "error", "warning", "note" (info), "debug", "trace": the words perfcast printed
/// before it used spdlog, so scripts that grep them keep working.
class LevelWord : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const char* w = "note";
    switch (msg.level) {
      case spdlog::level::trace: w = "trace"; break;
      case spdlog::level::debug: w = "debug"; break;
      case spdlog::level::warn: w = "warning"; break;
      case spdlog::level::err:
      case spdlog::level::critical: w = "error"; break;
      default: break;
    }
    dest.append(w, w + std::char_traits<char>::length(w));
  }
  [[nodiscard]] std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LevelWord>(); }
};

}  // namespace

void init_logging(const std::string& level) {
  const auto lvl = spdlog::level::from_str(level);
  // from_str answers "off" for any unknown name: accept "off" only when asked for.
  if (lvl == spdlog::level::off && level != "off") {
    throw std::invalid_argument("unknown log level \"" + level + "\" (trace, debug, info, warn, error, off)");
  }
  auto logger = std::make_shared<spdlog::logger>("perfcast", std::make_shared<spdlog::sinks::stderr_sink_st>());
  // "warning: ..." / "error: ..." / "note: ..." as the command printed before.
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<LevelWord>('*').set_pattern("%*: %v");
  logger->set_formatter(std::move(formatter));
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::trace);
  logger_slot() = logger;
}

spdlog::logger& log() {
  if (!logger_slot()) init_logging("info");
  return *logger_slot();
}

bool progress_enabled() { return isatty(STDERR_FILENO) != 0 && log().should_log(spdlog::level::info); }

void draw_progress(std::size_t done, std::size_t total) {
  if (!progress_enabled() || total == 0) return;
  const std::size_t width = 30, filled = done * width / total;
  std::fprintf(stderr, "\r[%s%s] %zu/%zu", std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace perfcast::cli
