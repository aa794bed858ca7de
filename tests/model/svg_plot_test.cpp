#include <catch2/catch.hpp>

#include <limits>

#include <string>

#include "model/report/svg_plot.hpp"

// One namespace per test file, so that files can share a unity batch.
namespace perfcast_test_model_svg_plot_test {

using namespace perfcast;

namespace {

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("xml_escape escapes markup and drops control characters", "[report][svg]") {
  CHECK(xml_escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  CHECK(xml_escape(std::string("x\x01y")) == "x y");
}

TEST_CASE("nice_ticks: 1-2-5 steps from 0 past the maximum", "[report][svg]") {
  CHECK(nice_ticks(7.757) == std::vector<double>{0, 2, 4, 6, 8});             // raw step 1.55 -> 2
  CHECK(nice_ticks(2) == std::vector<double>{0, 0.5, 1, 1.5, 2});             // raw step 0.4 -> 0.5
  CHECK(nice_ticks(0) == std::vector<double>{0, 1});                          // degenerate
}

TEST_CASE("every chart ends on any finite value: subnormal, huge, at the limit of a double", "[report][svg]") {
  // These used to loop without end (a step of 0 from a subnormal maximum, an infinite axis end).
  const double tiny = std::numeric_limits<double>::denorm_min(), huge = std::numeric_limits<double>::max();
  CHECK(nice_ticks(tiny) == std::vector<double>{0, tiny});
  CHECK(nice_ticks(1e-310) == std::vector<double>{0, 1e-310});
  for (double m : {1e-300, 1e300, huge}) {
    const auto t = nice_ticks(m);
    CHECK(t.size() <= 7);
    CHECK(t.back() >= m);
  }
  for (double v : {tiny, 1e-310, 1e300, huge}) {
    CHECK(svg_scatter("s", {{v, v, "a"}, {1.0, 2.0, "b"}}, "s", 1.0).find("</svg>") != std::string::npos);
    CHECK(svg_line_chart("c", "size", "GB/s", {{"one", {{1024, v}, {2048, v}}}}, true).find("</svg>") != std::string::npos);
    CHECK(svg_stacked_bars("t", {"a"}, {{"r", {v}}}, "s", 1.0).find("</svg>") != std::string::npos);
  }
}

TEST_CASE("stacked bars: widths proportional to the values on a 560 px axis", "[report][svg]") {
  // Axis to 2 (ticks 0..2 by 0.5): a value of 1 is 280 px, 2 is 560 px, zeros draw nothing.
  const std::string svg = svg_stacked_bars("t", {"a", "b"}, {{"r0", {1, 1}}, {"r1", {2, 0}}}, "ms", 1.0);
  CHECK(count(svg, "width=\"280.0\"") == 2);
  CHECK(count(svg, "width=\"560.0\"") == 1);
  CHECK(count(svg, "<rect x=\"") == 2 + 3);  // 2 legend swatches + 3 non-zero segments
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
}

TEST_CASE("stacked bars: a long value note widens its column instead of being clipped", "[report][svg]") {
  // Labels "r" (2 characters with the gap: label column 90 px). The note makes the printed
  // text "6000 cases, " + 60 characters = 72 characters: 72 x 6.5 + 12 = 480 px of value
  // column, so the plot narrows from 560 to 900 - 90 - 480 = 330 px and the drawing stays
  // 900 px wide; the bar of the axis maximum (6000 of 6000) is 330 px.
  const std::string note(60, 'x');
  const std::string svg = svg_stacked_bars("t", {"cases"}, {{"r", {6000}, note}}, "cases", 1.0);
  CHECK(svg.find("width=\"900\"") != std::string::npos);
  CHECK(count(svg, "width=\"330.0\"") == 1);
  // A short note keeps the 170 px value column: 900 - 90 - 170 = 640 px, capped at the 560 px plot.
  CHECK(count(svg_stacked_bars("t", {"cases"}, {{"r", {6000}, "n"}}, "cases", 1.0), "width=\"560.0\"") == 1);
}

TEST_CASE("scatter: one marker per valid point, the y = x line, bad points left out", "[report][svg]") {
  const std::string svg = svg_scatter("s", {{1e-3, 1.1e-3, "a"}, {2e-3, 1.9e-3, "b"}, {0, 1e-3, "zero"}, {1e-3, -1, "negative"}}, "ms", 1e3);
  CHECK(count(svg, "<circle") == 2);
  CHECK(svg.find("<title>y = x</title>") != std::string::npos);
  CHECK(svg.find("(+10.0%)") != std::string::npos);
  CHECK(svg.find("(-5.0%)") != std::string::npos);
}

TEST_CASE("line chart: log2 x axis labelled in bytes", "[report][svg]") {
  const std::string svg = svg_line_chart("c", "size", "GB/s", {{"one", {{1 << 20, 10}, {1 << 30, 400}}}}, true);
  CHECK(svg.find(">1MiB<") != std::string::npos);
  CHECK(svg.find(">1GiB<") != std::string::npos);
  CHECK(count(svg, "<circle") == 2);
  CHECK(count(svg, "<polyline") == 1);
}

}  // namespace perfcast_test_model_svg_plot_test
