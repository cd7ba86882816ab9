// Plots regenerated from result files with gnuplot (Debian's gnuplot-nox): for each plot a
// self-contained script (data inline) and, when gnuplot is installed, its SVG and PNG.
#pragma once

#include <string>
#include <vector>

#include "sdpa/report.hpp"

namespace sdpa::plots {

struct Output {
  std::vector<std::string> plots;  // base names, each with NAME.gp and, if rendered, .svg/.png
  bool rendered = false;
  std::string message;  // e.g. why nothing was rendered and how to install gnuplot
};

// Writes the plots of every experiment of the given files into dir.
Output write_plots(const std::vector<report::ResultFile>& results, const std::string& dir);

}  // namespace sdpa::plots
