#pragma once
/// \file plan_command.hpp
/// `perfcast plan` as a library call: the search of model/plan_search and its reports as
/// text (the top plans, why the losers lose, what was screened out and where the workload
/// file's own parallelism ranks), JSON (docs/schemas/plan_result.schema.json) and CSV (one
/// row per ranked plan). Times in seconds and memory in bytes in the machine formats.

#include <string>

#include "model/plan_search/plan_search.hpp"

namespace perfcast {

[[nodiscard]] std::string render_plan_text(const PlanSearchResult& r, int top);
/// {"context", "search": {...}, "plans": [...], "rejected": [...], "not_run": [...], "asked": {...}}
[[nodiscard]] std::string render_plan_json(const PlanSearchResult& r, const PlanSearchRequest& request);
[[nodiscard]] std::string render_plan_csv(const PlanSearchResult& r);

}  // namespace perfcast
