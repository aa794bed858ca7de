#include "validation/commands/profile_command.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "core/run_context.hpp"
#include "predictors/measurement.hpp"

namespace perfcast::validation {

LoadedSweeps load_profile_sweeps(const std::vector<std::string>& files) {
  LoadedSweeps l;
  std::size_t total = 0;
  l.json = {{"context", command_context("profile", files)}, {"dry_run", true}, {"sweeps", nlohmann::json::array()}};
  for (const auto& f : files) {
    l.sweeps.push_back(profiler::load_sweep(f));
    const auto& s = l.sweeps.back();
    total += s.cases.size();
    l.text += fmt::format("{}: sweep \"{}\", {} cases, {} warm-up + {} timed runs each{}\n", s.file, s.name, s.cases.size(),
                          s.settings.warmup, s.settings.repetitions, s.settings.flush_l2 ? ", L2 flushed" : "");
    l.json["sweeps"].push_back({{"file", s.file}, {"name", s.name}, {"cases", s.cases.size()}, {"warmup", s.settings.warmup},
                                {"repetitions", s.settings.repetitions}, {"flush_l2", s.settings.flush_l2}});
  }
  l.text += fmt::format("{} cases in all\n", total);
  l.json["cases"] = total;
  return l;
}

ProfileOutcome run_profile_sweeps(const ProfileRequest& a, const LoadedSweeps& loaded) {
  // Lines go to <out>.partial as they are measured (a run cut short keeps what it measured);
  // the file is renamed to <out> when the run ends.
  const std::filesystem::path out(a.out);
  std::filesystem::path partial = out;
  partial += ".partial";
  if (a.append && std::filesystem::exists(out)) std::filesystem::copy_file(out, partial, std::filesystem::copy_options::overwrite_existing);
  std::ofstream file(partial, a.append ? std::ios::app : std::ios::trunc);
  if (!file) throw std::runtime_error("cannot write " + partial.string());
  auto options = a.options;
  options.time_budget_s = a.time_budget_s;
  ProfileOutcome r;
  r.summary = profiler::run_sweeps(loaded.sweeps, options, [&](const Measurement& m) {
    file << measurement_to_jsonl(m);
    file.flush();
  });
  file.close();
  if (!file) throw std::runtime_error("cannot write " + partial.string());
  std::filesystem::rename(partial, out);
  r.json = loaded.json;
  r.json.update({{"dry_run", false}, {"measured", r.summary.measured}, {"failed", r.summary.failed}, {"not_run", r.summary.not_run},
                 {"timer", r.summary.timer}, {"cupti_error", r.summary.cupti_error}, {"failures", r.summary.failures},
                 {"written", a.out}});
  return r;
}

}  // namespace perfcast::validation
