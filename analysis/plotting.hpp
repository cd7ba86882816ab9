// Internal to sdpa_analysis: what the kinds' plots are made of (kinds/<kind>/report.cpp) and
// plots.cpp draws with gnuplot. A figure is one panel, or several side by side; a panel has
// series of rows "x value ci_low ci_high theory roof" (NaN where there is none).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "grouping.hpp"
#include "sdpa/record.hpp"

namespace sdpa::plots {

// A curve plot: a statistic (with its CI) against the row parameter, one series per value of
// the column parameter, with the theory (where the record has one) as a dashed line. Drawn
// for every group of an experiment's records that has two values of the row parameter or more.
struct Curve {
  std::string suffix;                // file name part
  std::string row_key = "d_k";       // the x axis
  std::string column_key = "scale";  // one series per value
  std::string xlabel = "d_k (key dimension)";
  std::string series_prefix = "c = ";
  std::string stat;  // record field holding {value, ci95, predicted}, or a JSON pointer to one
  std::string ylabel;
  bool logy = false;
  // With files from several machines, also one figure with a panel per machine on one y scale.
  bool compare_machines = false;
  // The prediction to draw for a record, if any.
  std::function<std::optional<double>(const json& record)> theory = [](const json&) {
    return std::optional<double>();
  };
  // The bound a record's value cannot pass, in the statistic's units (its own peak or memory
  // roof), if any: one line when every record of a panel shares it, else a line per series. The
  // y axis then starts at 0.
  std::function<std::optional<double>(const json& record)> roof = [](const json&) {
    return std::optional<double>();
  };
  std::string roof_title = {};  // what that line is, for the legend
  // Whether a group of records gets this curve (a kind may plot its groups in different units).
  std::function<bool(const std::vector<const json*>&)> applies = [](const auto&) { return true; };
  // Extra gnuplot commands for a group (reference lines, markers).
  std::function<std::string(const std::vector<const json*>&)> decorate = [](const auto&) {
    return std::string();
  };
};

// One line of a plot: rows "x value ci_low ci_high theory roof".
struct Series {
  std::string title;
  std::vector<std::string> rows = {};
  bool has_theory = false;
  bool has_roof = false;  // its own roof line (column 6)
};

// One set of axes.
struct Panel {
  std::string title, xlabel, ylabel;
  bool logx = true, logy = false;
  bool bands = false;         // the CI as a shaded band (dense curves) rather than error bars
  std::string decorate = {};  // gnuplot commands: reference lines, markers, ranges
  std::vector<Series> series = {};
  std::string roof_title = {};      // with series' roofs: what they are
  std::optional<double> roof = {};  // one roof line for every series
  double top = 0;                   // with a roof: the highest value, interval end or roof
};

struct Figure {
  std::string name, title;
  std::vector<Panel> panels;
  // What the figure shows, for its caption (the machine and commit are added by write_plots).
  std::string caption = {};
};

// A statistic's prediction, where it has one.
std::optional<double> predicted_field(const json& statistic);
// A number as gnuplot reads it: JSON's shortest form, NaN (a gap) for null.
std::string data(const json& x);

// Group g of `groups` in a figure's file name ("-<g + 1>", none when there is one group) and
// in its title (" (<the group's parameters>)").
std::string group_suffix(std::size_t g, std::size_t groups);
std::string group_label(const report::Group& group);

}  // namespace sdpa::plots
