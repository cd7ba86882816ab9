// Plots regenerated from result files with gnuplot (Debian's gnuplot-nox): for each plot a
// self-contained script (data inline) and, when gnuplot is installed, its SVG and PNG.
#pragma once

#include <string>
#include <vector>

#include "sdpa/report.hpp"

namespace sdpa::plots {

struct Plot {
  std::string name;        // base name: NAME.gp and, if rendered, NAME.svg and NAME.png
  std::string experiment;  // the experiment it draws
  std::string caption;     // what it shows, from which machine and suite commit
  std::vector<std::string> sources;  // the result files it was drawn from, as given
};

struct Output {
  std::vector<Plot> plots;
  bool rendered = false;
  std::string message;  // e.g. why nothing was rendered and how to install gnuplot
};

// Writes the plots of every experiment of the given files into dir, their gnuplot scripts into
// scripts_dir (dir when empty).
Output write_plots(const std::vector<report::ResultFile>& results, const std::string& dir,
                   const std::string& scripts_dir = "");

}  // namespace sdpa::plots
