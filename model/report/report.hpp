#pragma once
/// \file report.hpp
/// Views of a prediction: a text report for people, a JSON object for programs (with a
/// `context` block first), and a Chrome trace (one process per rank, one thread per
/// host thread and stream) that Perfetto and chrome://tracing open.

#include <string>

#include "model/predict/predict.hpp"

namespace perfcast {

[[nodiscard]] std::string render_text(const Prediction& p, int top_ops = 8);
[[nodiscard]] std::string render_json(const Prediction& p);
[[nodiscard]] std::string render_chrome_trace(const Prediction& p);

/// The `context` block of every JSON result: version, commit, date, inputs.
[[nodiscard]] std::string context_json(const Prediction& p);

}  // namespace perfcast
