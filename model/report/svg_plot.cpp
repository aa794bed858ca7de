#include "model/report/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace perfcast {

namespace {

/// Colours of the parts and series, in order (Okabe-Ito palette, readable by colour-blind readers).
constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"};

const char* colour(std::size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

bool usable(double v) { return std::isfinite(v) && v >= 0; }

std::string number(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 1) return fmt::format("{:.3g}", v);
  return fmt::format("{:.2g}", v);
}

std::string byte_label(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{}{}", number(bytes), units[u]);
}

std::string open_svg(int width, int height, const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<title>{2}</title>\n"
      "<text x=\"8\" y=\"16\" font-size=\"13\" font-weight=\"bold\">{2}</text>\n",
      width, height, xml_escape(title));
}

std::string legend(const std::vector<std::string>& names, int x, int y) {
  std::string out;
  int cx = x;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n", cx, y,
                       colour(i), cx + 14, y + 9, xml_escape(names[i]));
    cx += 24 + 7 * static_cast<int>(names[i].size());
  }
  return out;
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab and newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += ' ';
        else out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double max, int n) {
  n = std::max(n, 1);
  if (!(max > 0) || !std::isfinite(max)) return {0, 1};
  const double raw = max / n;
  // A subnormal maximum (5e-324) has no round step whose multiples a loop can count.
  if (!std::isnormal(raw)) return {0, max};
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = p;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * p;
    if (step >= raw) break;
  }
  if (!(step > 0) || !std::isfinite(step)) return {0, max};
  // step >= max / n: at most n + 1 ticks reach max (a bound, whatever the rounding).
  std::vector<double> out;
  for (int i = 0; i <= n + 1; ++i) {
    const double v = std::min(step * i, std::numeric_limits<double>::max());  // never inf at the top of a double
    out.push_back(v);
    if (!(v < max)) break;
  }
  return out;
}

std::string svg_stacked_bars(const std::string& title, const std::vector<std::string>& parts, const std::vector<StackedBar>& bars,
                             const std::string& unit, double scale, bool last_part_is_free) {
  std::size_t longest = 0;
  for (const auto& b : bars) longest = std::max(longest, b.label.size());
  // Each bar's value (and note), printed after its end: readable without hovering.
  std::vector<std::string> texts;
  std::size_t longest_text = 0;
  double max_total = 0;
  for (const auto& b : bars) {
    double total = 0, used = 0;
    for (std::size_t i = 0; i < b.values.size() && i < parts.size(); ++i) {
      if (!usable(b.values[i])) continue;
      total += b.values[i] * scale;
      if (!last_part_is_free || i + 1 < parts.size()) used += b.values[i] * scale;
    }
    max_total = std::max(max_total, total);
    const std::string value = !(total > 0)       ? std::string()
                              : last_part_is_free ? number(used) + " of " + number(total) + " " + unit
                                                  : number(total) + " " + unit;
    texts.push_back(value + (b.note.empty() ? "" : (value.empty() ? "" : ", ") + b.note));
    longest_text = std::max(longest_text, texts.back().size());
  }
  // The chart fits the page's 900 px where it can: a wide label column or long values narrow
  // the plot (to 240 px); beyond that the drawing grows and the page scales it, so that no
  // label or value is clipped (about 7 px per character of labels, 6.5 of values).
  const int label_w = std::clamp(static_cast<int>(longest) * 7 + 12, 90, 420), row_h = 18, top = 44;
  const int value_w = std::max(170, static_cast<int>(static_cast<double>(longest_text) * 6.5) + 12);
  const int plot_w = std::clamp(900 - label_w - value_w, 240, 560);
  const int height = top + row_h * static_cast<int>(bars.size()) + 40;
  const std::vector<double> ticks = nice_ticks(max_total);
  const double axis_max = ticks.back() > 0 ? ticks.back() : 1;
  std::string out = open_svg(label_w + plot_w + value_w, height, title);
  out += legend(parts, 8, 24);
  const int axis_y = top + row_h * static_cast<int>(bars.size()) + 4;
  for (double t : ticks) {
    const double x = label_w + plot_w * t / axis_max;
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/><text x=\"{0:.1f}\" y=\"{3}\" "
                       "text-anchor=\"middle\">{4}</text>\n",
                       x, top, axis_y, axis_y + 14, number(t));
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", label_w + plot_w, axis_y + 28, xml_escape(unit));
  for (std::size_t r = 0; r < bars.size(); ++r) {
    const int y = top + row_h * static_cast<int>(r);
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", label_w - 6, y + 12, xml_escape(bars[r].label));
    double x = label_w;
    const std::string style = bars[r].muted ? " fill-opacity=\"0.35\" stroke=\"#555\" stroke-dasharray=\"3,2\"" : "";
    for (std::size_t i = 0; i < bars[r].values.size() && i < parts.size(); ++i) {
      const double v = bars[r].values[i];
      if (!usable(v) || v == 0) continue;
      const double w = plot_w * v * scale / axis_max;
      out += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"{}><title>{}: {} {}</title></rect>\n", x,
                         y + 2, w, row_h - 4, colour(i), style, xml_escape(bars[r].label + " " + parts[i]), number(v * scale),
                         xml_escape(unit));
      x += w;
    }
    const std::string& text = texts[r];
    if (!text.empty())
      out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"#333\">{}</text>\n", x + 4, y + 12, xml_escape(text));
  }
  return out + "</svg>\n";
}

std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series, bool log2_x) {
  const int left = 60, plot_w = 560, plot_h = 260, top = 44;
  double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
  auto fx = [&](double x) { return log2_x ? std::log2(x) : x; };
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (!usable(y) || !(log2_x ? x > 0 : usable(x))) continue;
      xmin = std::min(xmin, fx(x));
      xmax = std::max(xmax, fx(x));
      ymax = std::max(ymax, y);
    }
  if (!(xmax > xmin)) {
    xmin = 0;
    xmax = 1;
  }
  const std::vector<double> yt = nice_ticks(ymax);
  const double ytop = yt.back() > 0 ? yt.back() : 1;
  auto px = [&](double x) { return left + plot_w * (fx(x) - xmin) / (xmax - xmin); };
  auto py = [&](double y) { return top + plot_h - plot_h * y / ytop; };
  std::vector<std::string> names;
  for (const auto& s : series) names.push_back(s.label);
  std::string out = open_svg(left + plot_w + 20, top + plot_h + 50, title);
  out += legend(names, 8, 24);
  for (double t : yt)
    out += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/><text x=\"{3}\" y=\"{4:.1f}\" "
                       "text-anchor=\"end\">{5}</text>\n",
                       left, py(t), left + plot_w, left - 4, py(t) + 4, number(t));
  const int steps = log2_x ? static_cast<int>(xmax - xmin) : 5;
  for (int i = 0; i <= steps; i += std::max(1, steps / 8)) {
    const double v = log2_x ? std::exp2(xmin + i) : xmin + (xmax - xmin) * i / steps;
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(v), top + plot_h + 14,
                       log2_x ? byte_label(v) : number(v));
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + plot_w / 2, top + plot_h + 32,
                     xml_escape(x_label));
  out += fmt::format("<text x=\"12\" y=\"{}\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>\n", top + plot_h / 2,
                     top + plot_h / 2, xml_escape(y_label));
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", left, top, plot_w, plot_h);
  for (std::size_t i = 0; i < series.size(); ++i) {
    std::string path;
    for (const auto& [x, y] : series[i].points) {
      if (!usable(y) || !(log2_x ? x > 0 : usable(x))) continue;
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", px(x), py(y));
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"><title>{}: {} {}</title></circle>\n", px(x), py(y),
                         colour(i), xml_escape(series[i].label), log2_x ? byte_label(x) : number(x), number(y));
    }
    if (!path.empty())
      out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", path, colour(i));
  }
  return out + "</svg>\n";
}

std::string svg_scatter(const std::string& title, const std::vector<ScatterPoint>& points, const std::string& unit, double scale) {
  const int left = 60, size = 360, top = 30;
  double lo = INFINITY, hi = 0;
  for (const auto& p : points) {
    if (!(p.measured > 0) || !(p.predicted > 0) || !std::isfinite(p.measured) || !std::isfinite(p.predicted)) continue;
    lo = std::min({lo, p.measured * scale, p.predicted * scale});
    hi = std::max({hi, p.measured * scale, p.predicted * scale});
  }
  if (!(hi > 0)) {
    lo = 0.5;
    hi = 1;
  }
  const bool log_axes = hi / lo > 20;
  // The margins stay finite and positive for any finite input (1.7e308 x 1.2 would be inf).
  const double margin_lo = std::max(lo / 1.2, std::numeric_limits<double>::denorm_min());
  const double margin_hi = std::min(hi * (log_axes ? 1.2 : 1.15), std::numeric_limits<double>::max());
  double amin = log_axes ? std::log10(margin_lo) : 0, amax = log_axes ? std::log10(margin_hi) : margin_hi;
  auto f = [&](double v) { return log_axes ? std::log10(v) : v; };
  auto pos = [&](double v) { return size * (f(v) - amin) / (amax - amin); };
  auto px = [&](double v) { return left + pos(v); };
  auto py = [&](double v) { return top + size - pos(v); };
  std::string out = open_svg(left + size + 30, top + size + 50, title);
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", left, top, size, size);
  // The axis range in display units, sampled for the bands (straight lines on both axis kinds).
  const double v0 = log_axes ? std::pow(10.0, amin) : 1e-12, v1 = log_axes ? std::pow(10.0, amax) : amax;
  auto band = [&](double k, const char* attrs) {
    return fmt::format("<polygon points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\" {}/>\n", px(v0), py(v0 * (1 + k)),
                       px(v1 / (1 + k)), py(v1), px(v1), py(v1 * (1 - k)), px(v0), py(v0 * (1 - k)), attrs);
  };
  // The bands and the diagonal are clipped to the plot area (a nested viewport clips).
  out += fmt::format("<svg x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{2}\" viewBox=\"{0} {1} {2} {2}\" overflow=\"hidden\">\n", left, top, size);
  out += band(0.10, "fill=\"#0072B2\" fill-opacity=\"0.08\" stroke=\"none\"");
  out += band(0.05, "fill=\"none\" stroke=\"#0072B2\" stroke-dasharray=\"4 3\" stroke-opacity=\"0.6\"");
  out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333\"><title>y = x</title></line>\n", px(v0),
                     py(v0), px(v1), py(v1));
  out += "</svg>\n";
  // Ticks: round values on a linear axis, 1-2-5 per decade on a log one.
  std::vector<double> ticks;
  if (log_axes) {
    for (double dec = std::floor(amin); dec <= amax; ++dec)
      for (double m : {1.0, 2.0, 5.0})
        if (const double v = m * std::pow(10.0, dec); std::log10(v) >= amin && std::log10(v) <= amax) ticks.push_back(v);
  } else {
    for (double v : nice_ticks(amax))
      if (v <= amax) ticks.push_back(v);
  }
  for (double t : ticks) {
    if (!log_axes && t <= 0) continue;
    out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#888\"/><text x=\"{0:.1f}\" y=\"{3}\" "
                       "text-anchor=\"middle\">{4}</text>\n",
                       px(t), top + size, top + size + 4, top + size + 15, number(t));
    out += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#888\"/><text x=\"{3}\" y=\"{4:.1f}\" "
                       "text-anchor=\"end\">{5}</text>\n",
                       left - 4, py(t), left, left - 6, py(t) + 4, number(t));
  }
  for (const auto& p : points) {
    if (!(p.measured > 0) || !(p.predicted > 0) || !std::isfinite(p.measured) || !std::isfinite(p.predicted)) continue;
    const double m = p.measured * scale, q = p.predicted * scale;
    out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#D55E00\" fill-opacity=\"0.8\"><title>{}: measured {} {}, "
                       "predicted {} {} ({:+.1f}%)</title></circle>\n",
                       px(m), py(q), xml_escape(p.label), number(m), xml_escape(unit), number(q), xml_escape(unit), (q / m - 1) * 100);
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">measured ({}{})</text>\n", left + size / 2, top + size + 30,
                     xml_escape(unit), log_axes ? ", log" : "");
  out += fmt::format("<text x=\"14\" y=\"{0}\" transform=\"rotate(-90 14 {0})\" text-anchor=\"middle\">predicted ({1}{2})</text>\n",
                     top + size / 2, xml_escape(unit), log_axes ? ", log" : "");
  out += fmt::format("<text x=\"{}\" y=\"{}\">{} - {} {}; band: +-10% shaded, +-5% dashed</text>\n", left, top + size + 46,
                     number(log_axes ? v0 : 0), number(v1), xml_escape(unit));
  return out + "</svg>\n";
}

}  // namespace perfcast
