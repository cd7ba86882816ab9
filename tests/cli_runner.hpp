// Runs the sdpa-bench executable as a user would, capturing exit code, stdout and stderr.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sdpa/record.hpp"
#include "test_files.hpp"

// A cross-build's tests start sdpa-bench through the emulator (qemu, CMake's
// CMAKE_CROSSCOMPILING_EMULATOR) that runs them too; a native build has none.
#ifndef SDPA_EMULATOR
#define SDPA_EMULATOR ""
#endif

namespace sdpa::testing {

// `command` (a shell command line that starts with an sdpa-bench path) as this build runs it.
inline std::string emulated(const std::string& command) {
  const std::string emulator = SDPA_EMULATOR;
  return emulator.empty() ? command : emulator + " " + command;
}

struct CommandResult {
  int exit_code = -1;  // -1 when the process was killed by a signal
  int signal = 0;      // the signal that killed it, 0 when it exited
  std::string out, err;
};

// `env` (e.g. "PATH=/nonexistent ") is put before the command.
inline CommandResult run_cli(const std::string& args, const TempDir& dir,
                             const std::string& env = "") {
  const std::string cmd = env + emulated(SDPA_BENCH) + " " + args + " >" + (dir / ".out").string() +
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

// A running sdpa-bench whose stdout and stderr go to files.
struct Child {
  pid_t pid = -1;
  std::filesystem::path out, err;
};

// Starts sdpa-bench with `args` in folder `cwd` (empty: this one) without waiting for it, with
// `env` ("NAME=value") added to the environment; its output goes to files in `dir`.
inline Child spawn_cli(const std::vector<std::string>& args, const TempDir& dir,
                       const std::filesystem::path& cwd = {},
                       const std::vector<std::string>& env = {}) {
  static int count = 0;
  Child child;
  child.out = dir / (".out" + std::to_string(++count));
  child.err = dir / (".err" + std::to_string(count));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, child.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, child.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<std::string> words = {SDPA_BENCH};
  if (!std::string(SDPA_EMULATOR).empty()) words.insert(words.begin(), SDPA_EMULATOR);
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_words = env;
  std::vector<char*> envp;
  for (auto& w : env_words) envp.push_back(w.data());
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(nullptr);
  const int rc = posix_spawn(&child.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn failed");
  return child;
}

inline CommandResult wait_cli(const Child& child) {
  int status = 0;
  while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  CommandResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = slurp(child.out);
  r.err = slurp(child.err);
  std::filesystem::remove(child.out);
  std::filesystem::remove(child.err);
  return r;
}

inline CommandResult run_cli(const std::vector<std::string>& args, const TempDir& dir,
                             const std::filesystem::path& cwd = {}) {
  return wait_cli(spawn_cli(args, dir, cwd));
}

// Waits until `path` (a spawned run's stderr, say) holds `text`, or `child` ended; true if it
// does. An event to wait for, not a time: the deadline only ends a test that would hang.
inline bool wait_for_text(const std::filesystem::path& path, const std::string& text,
                          const Child& child) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (std::chrono::steady_clock::now() < deadline) {
    if (slurp(path).find(text) != std::string::npos) return true;
    siginfo_t info{};
    if (waitid(P_PID, id_t(child.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0)
      return false;  // it ended (and can still be waited for)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// The records of every experiment of a result file: what must not depend on how the run went.
inline json records_of(const std::string& result_text) {
  json doc = json::parse(result_text), out = json::array();
  for (const auto& e : doc["experiments"]) out.push_back(e["records"]);
  return out;
}

}  // namespace sdpa::testing
