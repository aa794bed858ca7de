#pragma once
/// \file trace_predict.hpp
/// `perfcast predict` for an imported trace workload (model "trace", trace_workload.hpp):
/// kernels with descriptors get the system's predictors (its kernel calibration where one
/// exists), measured kernels keep their durations, sized collectives get the collective
/// model for their communicator size on the system, host times stay measured (no launch
/// overheads added: the trace's host times include the launch calls).

#include <memory>
#include <string>
#include <vector>

#include "model/predict/predict.hpp"
#include "model/traces/trace_workload.hpp"

namespace perfcast {

/// Throws ConfigError when a collective's communicator is larger than the system.
[[nodiscard]] std::unique_ptr<Prediction> predict_trace(SystemSpec system, TraceWorkload workload,
                                                        std::vector<std::string> overrides = {}, int iterations = 3);

}  // namespace perfcast
