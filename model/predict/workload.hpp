#pragma once
/// \file workload.hpp
/// Any workload `perfcast predict` accepts: a DLRM or a Transformer, told apart by the
/// file's "model" key, with small accessors for what every report prints.

#include <cstdint>
#include <string>
#include <variant>

#include "model/traces/trace_workload.hpp"
#include "model/graph/transformer_spec.hpp"
#include "model/graph/workload_spec.hpp"

namespace perfcast {

using Workload = std::variant<DlrmSpec, TransformerSpec, TraceWorkload>;

/// Reads a workload file of any model ("dlrm", "transformer" or "trace"). Throws ConfigError.
[[nodiscard]] Workload parse_any_workload(const JsonDocument& doc);

[[nodiscard]] const std::string& workload_name(const Workload& w);
[[nodiscard]] const std::string& workload_file(const Workload& w);
/// Samples (DLRM) or sequences (Transformer) per iteration, all ranks.
[[nodiscard]] std::int64_t workload_batch(const Workload& w);
[[nodiscard]] inline bool is_dlrm(const Workload& w) { return std::holds_alternative<DlrmSpec>(w); }

}  // namespace perfcast
