#pragma once
/// \file runtime_profile.hpp
/// The software stack a workload runs on (configs/runtimes/<name>.json, schema
/// "perfcast.runtime"): host costs per op, per backward op, per launch and per collective
/// that belong to the framework, not to the GPU system, with the fit they came from. A
/// workload names its runtime ("runtime": "megatron_deepspeed"); without one, Transformers
/// use megatron_deepspeed and other workloads pytorch_eager; `--set runtime=NAME` overrides.
/// Values a profile sets replace the system file's `host` values; the others stay.

#include <optional>
#include <string>

#include "core/json_reader.hpp"
#include "topology/system_spec.hpp"

namespace perfcast {

struct RuntimeProfile {
  std::string name;  ///< file stem, e.g. "megatron_deepspeed"
  std::string file;
  std::optional<Seconds> op_overhead, backward_op_overhead, launch_overhead, collective_launch_overhead;
  /// "pipeline_transfers": "host_blocking" (true: the host waits for every pipeline
  /// transfer and synchronizes the device, Megatron-DeepSpeed) or "stream_ordered" (false:
  /// only the compute stream waits for the transfer). Unset: the workload's default (blocking).
  std::optional<bool> pipeline_host_blocking;
  std::string measured_on;  ///< what the fit used ("" : not fitted)
  double heldout_error = -1;  ///< held-out geomean |error| of the fit; < 0: none
  [[nodiscard]] bool fitted() const { return heldout_error >= 0; }
};

/// Removes "runtime" from the workload document (the workload parsers do not know it) and
/// returns it; nullopt when absent. Throws ConfigError when it is not a string.
[[nodiscard]] std::optional<std::string> take_runtime_name(JsonDocument& workload_doc);

/// Default runtime for a workload kind: "megatron_deepspeed" for Transformers, else "pytorch_eager".
[[nodiscard]] std::string default_runtime(bool transformer);

/// Reads configs/runtimes/<name>.json found beside the workload's folder
/// (<workload dir>/../runtimes/). Returns nullopt when the file is absent and `required` is
/// false (an implicit default); throws ConfigError when absent and required, or malformed.
[[nodiscard]] std::optional<RuntimeProfile> load_runtime_profile(const std::string& name, const std::string& workload_file,
                                                                 bool required);

/// Puts the profile's host values into `system.host`.
void apply_runtime(SystemSpec& system, const RuntimeProfile& runtime);

}  // namespace perfcast
