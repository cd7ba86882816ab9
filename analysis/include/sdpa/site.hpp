// The pages of a report: an index with the machines side by side and the headline cells, one
// page per experiment (description, config, plots, tables, the legend once), our kernels against
// ggml per cell and the claims.
// Built once as a model from the result files alone, then written by one writer per format:
// Markdown (results/README.md, results/ggml.md, results/experiments/*.md) and HTML (`report --html
// DIR`, a static site that opens from the file system and requests nothing).
#pragma once

#include <string>
#include <vector>

#include "sdpa/plots.hpp"
#include "sdpa/report.hpp"

namespace sdpa::site {

struct Link {
  std::string text;
  std::string target;  // from the site's root; a page's path (see Page) when `page`
  bool page = false;
};

struct Figure {
  std::string image;  // from the site's root, without extension ("plots/NAME")
  std::string caption;
};

// A section of a page, written in this order: heading, paragraphs, code, figures, tables, links.
struct Section {
  std::string heading;  // none when empty
  std::vector<std::string> paragraphs = {};
  std::string code = {};  // preformatted (a config), none when empty
  std::vector<Figure> figures = {};
  std::vector<report::Table> tables = {};
  std::vector<Link> links = {};
};

struct Page {
  std::string path;  // from the root, without extension: "index", "claims", "experiments/NAME"
  std::string title;
  std::vector<Section> sections;
};

// Where a page's file lives and how its writer names it: the index is README.md in Markdown (a
// repository host shows it for the folder) and index.html in HTML.
std::string markdown_file(const std::string& page);
std::string html_file(const std::string& page);
// From a page to the site's root: "../" per folder of its path.
std::string to_root(const std::string& page);

struct Inputs {
  const std::vector<report::ResultFile>* results = nullptr;
  std::vector<plots::Plot> plots = {};
  // Per result file, in order: where the pages link to it, from the site's root.
  std::vector<std::string> data_links = {};
  std::vector<std::string> csv_files = {};  // from the root, listed on the index
};

// Every page, the index first. The claims page is there when the files hold the experiments
// the claims need (sdpa/claims.hpp).
std::vector<Page> pages(const Inputs& in);

// One page in each format, links made relative to the page.
std::string markdown(const Page& page);
std::string html(const Page& page);

// Where the HTML site keeps its copy of each result file, in order: "data/<machine>-<name>",
// each different.
std::vector<std::string> data_files(const std::vector<report::ResultFile>& results);

}  // namespace sdpa::site
