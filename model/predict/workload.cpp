#include "model/predict/workload.hpp"

namespace perfcast {

Workload parse_any_workload(const JsonDocument& doc) {
  const JsonObject root(doc);
  const auto model = root.find("model");
  if (model && model->is_string() && model->as_string() == "transformer") return parse_transformer(doc);
  if (model && model->is_string() && model->as_string() == "trace") return parse_trace_workload(doc);
  return parse_workload(doc);  // DLRM, or the DLRM parser's error naming the allowed models
}

const std::string& workload_name(const Workload& w) {
  return std::visit([](const auto& s) -> const std::string& { return s.name; }, w);
}

const std::string& workload_file(const Workload& w) {
  return std::visit([](const auto& s) -> const std::string& { return s.file; }, w);
}

std::int64_t workload_batch(const Workload& w) {
  if (const auto* d = std::get_if<DlrmSpec>(&w)) return d->batch_size;
  if (const auto* t = std::get_if<TraceWorkload>(&w)) return t->batch;
  return std::get<TransformerSpec>(w).global_batch;
}

}  // namespace perfcast
