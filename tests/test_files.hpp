// Files for tests: a temporary folder and reading a file whole.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sdpa::testing {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh, empty folder under the system's temp folder, removed on destruction.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "sdpa-test-XXXXXX").string();
    path = mkdtemp(templ.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
  }
};

}  // namespace sdpa::testing
