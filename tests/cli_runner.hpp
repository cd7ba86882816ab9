// Runs the sdpa-bench executable as a user would, capturing exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sdpa::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

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

// `env` (e.g. "PATH=/nonexistent ") is put before the command.
inline CommandResult run_cli(const std::string& args, const TempDir& dir,
                             const std::string& env = "") {
  const std::string cmd = env + std::string(SDPA_BENCH) + " " + args + " >" + (dir / ".out").string() +
                          " 2>" + (dir / ".err").string();
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / ".out");
  r.err = slurp(dir / ".err");
  std::filesystem::remove(dir / ".out");
  std::filesystem::remove(dir / ".err");
  return r;
}

}  // namespace sdpa::testing
