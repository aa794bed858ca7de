#pragma once
/// \file svg_plot.hpp
/// Small, dependency-free SVG charts for the HTML report: horizontal stacked bars, line
/// charts (optionally log2 x), and predicted-vs-measured scatter plots with the y = x line
/// and +-5% / +-10% error bands. Output is well-formed XML (text escaped), sized in pixels,
/// with every value also in a <title> tooltip. Values must be finite and >= 0 (bars) or
/// > 0 (log axes); others are left out.

#include <string>
#include <utility>
#include <vector>

namespace perfcast {

/// "a &lt; b": &, <, >, " and ' escaped for XML text and attributes.
[[nodiscard]] std::string xml_escape(const std::string& s);

/// Up to about `n` round tick values from 0 to at least `max` (1, 2 or 5 times a power of ten).
[[nodiscard]] std::vector<double> nice_ticks(double max, int n = 5);

struct StackedBar {
  StackedBar(std::string label_, std::vector<double> values_, std::string note_ = "", bool muted_ = false)
      : label(std::move(label_)), values(std::move(values_)), note(std::move(note_)), muted(muted_) {}
  std::string label;
  std::vector<double> values;  ///< one per part, in the parts' order
  std::string note;            ///< printed after the bar's value (e.g. "does not fit"); "" none
  bool muted = false;          ///< drawn faded with a dashed outline (e.g. a plan that does not fit)
};

/// One horizontal bar per row, split into `parts` (a legend names them), its total printed
/// after it (and its note). `unit` names the axis ("ms"); values are multiplied by `scale`
/// for display (e.g. 1e3 for seconds -> ms). The label column is as wide as the longest
/// label (about 7 px per character, 90 to 420 px) and the value column as the longest value
/// and note (6.5 px per character, at least 170 px), so that none is clipped; the plot takes
/// what is left of 900 px (240 to 560 px), and the drawing is wider than 900 px only when
/// both columns need it.
/// `last_part_is_free`: the last part is headroom (free memory), and the printed value is
/// "used of total" ("27.3 of 74.5 GiB").
[[nodiscard]] std::string svg_stacked_bars(const std::string& title, const std::vector<std::string>& parts,
                                           const std::vector<StackedBar>& bars, const std::string& unit, double scale,
                                           bool last_part_is_free = false);

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  ///< (x, y)
};

/// Lines with markers; `log2_x`: x on a log2 axis labelled with byte sizes (x in bytes).
[[nodiscard]] std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                                         const std::vector<Series>& series, bool log2_x);

struct ScatterPoint {
  double measured = 0, predicted = 0;
  std::string label;
};

/// Predicted (y) against measured (x), both in seconds shown as `unit` after `scale`; the
/// y = x line and shaded +-10% and dashed +-5% bands. Log axes when the values span more
/// than 20x.
[[nodiscard]] std::string svg_scatter(const std::string& title, const std::vector<ScatterPoint>& points, const std::string& unit,
                                      double scale);

}  // namespace perfcast
