#pragma once
/// \file html_sections.hpp
/// Internal to the HTML report (html_report.cpp): the JSON field readers every section
/// uses, and the sections of the measured and fitted result kinds (html_measured_sections.cpp):
/// kernels, trace-stats, index-stats, the calibrations and profile runs.

#include <string>

#include <nlohmann/json.hpp>

#include "model/report/html_report.hpp"

namespace perfcast::html {

/// A number at `key` of `j`, or 0 when absent or not a number.
[[nodiscard]] double num(const nlohmann::json& j, const char* key);
/// A string at `key` of `j`, or "" when absent or not a string.
[[nodiscard]] std::string str(const nlohmann::json& j, const char* key);
/// `<h2>what: FILE</h2>` and the result's context line (version, commit, date, inputs).
[[nodiscard]] std::string heading(const std::string& what, const ReportInput& in);

/// kernels --json: single kernels (time per kernel) or measured rows (predicted against
/// measured, geomean |error| per family and per source).
[[nodiscard]] std::string kernels_section(const ReportInput& in);
/// trace-stats --json: each traced step's split (compute, exposed communication, copies,
/// idle) per rank, and the kernels that took the most time.
[[nodiscard]] std::string trace_stats_section(const ReportInput& in);
/// index-stats --json: per table, the accesses that repeat a row within the batch and the
/// share of accesses by how often their row is reused.
[[nodiscard]] std::string index_stats_section(const ReportInput& in);
/// calibrate comms / kernels --json: held-out errors of the fit against the model it
/// replaces; calibrate runtime --json: fitted against measured runs.
[[nodiscard]] std::string calibration_section(const ReportInput& in);
/// profile --json: cases per sweep, and what a run measured.
[[nodiscard]] std::string profile_section(const ReportInput& in);

}  // namespace perfcast::html
