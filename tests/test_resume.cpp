// Long runs survive interruption: killed at random points, interrupted, or resumed from a
// damaged journal, a run resumed with --resume ends with the records of an uninterrupted run,
// and no result file exists before the run completes.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <random>
#include <thread>

#include "cli_runner.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/journal.hpp"

using namespace sdpa::testing;  // the CLI runner and file helpers of cli_runner.hpp
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// 28 cells of a few milliseconds each (a few times that under the sanitizers).
const char* kConfig = R"({"name": "kill", "seed": 5, "experiments": [
 {"name": "v", "kind": "variance", "d_k": [8, 16, 24, 32, 40, 48, 56, 64, 72, 80], "n_q": 32,
  "n_kv": 32, "trials": 150, "scale": ["none", "sqrt_dk"]},
 {"name": "w", "kind": "variance", "d_k": [8, 16, 32, 64], "n_q": 16, "n_kv": 16, "trials": 100}]})";

struct Fixture {
  TempDir dir;
  std::string config = (dir / "kill.json").string();
  std::string result = (dir / "r.json").string();
  std::string journal = result + ".journal";
  sdpa::json reference;     // records of an uninterrupted run
  double cell_seconds = 0;  // the mean time of its cells

  Fixture() {
    dir.write("kill.json", kConfig);
    const auto r = run_cli({"run", config, "-j", "1", "-o", (dir / "ref.json").string()}, dir);
    REQUIRE(r.exit_code == 0);
    const auto result = sdpa::json::parse(slurp(dir / "ref.json"));
    reference = records_of(result.dump());
    for (const auto& e : result["experiments"]) cell_seconds += e["duration_s"].get<double>() / 28;
  }

  CommandResult resume() const { return run_cli({"run", config, "--resume", "-o", result}, dir); }

  // A journal holding the reference's first `cells` records of experiment 0, as a run killed
  // after them leaves it.
  void write_journal(std::size_t cells) const {
    sdpa::JournalHeader header;
    header.config_path = config;
    header.config_sha256 = sdpa::sha256_hex(kConfig);
    header.seed = 5;
    header.result = result;
    header.started_at = "2026-01-01T00:00:00Z";
    auto writer = sdpa::JournalWriter::create(journal, header);
    for (std::size_t c = 0; c < cells; ++c)
      writer.append({0, std::int64_t(c), 0.01, reference[0][c]});
  }

  void append_raw(const std::string& bytes) const {
    std::ofstream(journal, std::ios::app) << bytes;
  }

  // The line of the reference's record `cell` of experiment 0, as the journal writes it.
  std::string journal_line(std::size_t cell) const {
    return sdpa::journal_line({0, std::int64_t(cell), 0.01, reference[0][cell]},
                              sdpa::sha256_hex(kConfig));
  }

  void check_complete(const CommandResult& r) const {
    CAPTURE(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(records_of(slurp(result)) == reference);
    CHECK_FALSE(fs::exists(journal));
  }
};

// Waits until the journal holds at least `lines` lines (the header is one), or the run has
// written `result` (it finished first).
bool wait_for_journal(const std::string& journal, std::size_t lines,
                      const std::string& result = "") {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    const std::string text = slurp(journal);
    if (std::size_t(std::count(text.begin(), text.end(), '\n')) >= lines) return true;
    if (!result.empty() && fs::exists(result)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace

// The release build covers the kill moments (24 points); the sanitized build, whose runs start
// several times slower, checks the same paths at fewer of them (the first is killed while
// starting, every other one is killed again while resuming).
#ifdef SDPA_SANITIZE
constexpr int kKillPoints = 8;
#else
constexpr int kKillPoints = 24;
#endif

TEST_CASE("killed with SIGKILL at random points, a resumed run ends with the same records") {
  Fixture f;
  // Kill points from a fixed seed: the same on every run of the test. Most are a random cell
  // and a random moment within it (found through the journal, so that a loaded machine
  // moves them less); every eighth run is killed while it starts, before or as its journal
  // is created.
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<std::size_t> cell(0, 27);
  std::uniform_real_distribution<double> within_cell(0.0, f.cell_seconds), starting(0.0, 0.03);
  int killed_mid_run = 0;
  for (int i = 0; i < kKillPoints; ++i) {
    CAPTURE(i);
    fs::remove(f.result);
    fs::remove(f.journal);
    // Every other time the resumed run is killed too, so a journal is resumed twice.
    for (int kill = 0; kill < 1 + i % 2; ++kill) {
      const auto child = kill == 0
                             ? spawn_cli({"run", f.config, "-j", "1", "-o", f.result}, f.dir)
                             : spawn_cli({"run", f.config, "--resume", "-o", f.result}, f.dir);
      const bool while_starting = kill == 0 && i % 8 == 0;
      if (!while_starting) REQUIRE(wait_for_journal(f.journal, 1 + cell(rng), f.result));
      std::this_thread::sleep_for(
          std::chrono::duration<double>(while_starting ? starting(rng) : within_cell(rng)));
      ::kill(child.pid, SIGKILL);
      const auto r = wait_cli(child);
      if (kill == 0 && !while_starting && r.signal == SIGKILL && !fs::exists(f.result))
        ++killed_mid_run;
      // A result file, when there is one, is whole: it appears only as the run completes.
      if (fs::exists(f.result)) CHECK(records_of(slurp(f.result)) == f.reference);
    }
    f.check_complete(f.resume());
  }
  // Of the kills aimed at a running cell (21 of 24), at least 4 in 7 hit one.
  const int aimed = kKillPoints - (kKillPoints + 7) / 8;
  CHECK(killed_mid_run >= aimed * 4 / 7);
}

TEST_CASE("a cut-off last journal line is detected and its cell computed again") {
  Fixture f;
  f.write_journal(5);
  const std::string line = f.journal_line(5);
  f.append_raw(line.substr(0, line.size() / 2));  // killed in the middle of writing cell 5
  auto r = f.resume();
  CHECK(r.err.find("warning: " + f.journal + ":7: the last line is cut off or corrupt") !=
        std::string::npos);
  CHECK(r.err.find("resuming " + f.journal + ": 5 of 28 cells done") != std::string::npos);
  f.check_complete(r);

  // A whole but corrupt last line is treated the same way.
  fs::remove(f.result);
  f.write_journal(3);
  f.append_raw("{\"experiment\": 0, \"cell\": 3, \"seconds\": 0.1, \"rec\n");
  r = f.resume();
  CHECK(r.err.find("warning: " + f.journal + ":5: the last line is cut off or corrupt") !=
        std::string::npos);
  f.check_complete(r);
}

TEST_CASE("corruption before the last journal line is an error naming the file and line") {
  Fixture f;
  f.write_journal(2);
  f.append_raw("not json\n" + f.journal_line(2) + "\n");
  auto r = f.resume();
  CHECK(r.exit_code == 2);
  CHECK(r.err.rfind("error: " + f.journal + ":4: corrupt journal line: ", 0) == 0);
  CHECK_FALSE(fs::exists(f.result));

  fs::remove(f.journal);
  f.write_journal(3);
  f.append_raw(f.journal_line(1) + "\n" + f.journal_line(4) + "\n");
  r = f.resume();
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: " + f.journal +
                     ":5: corrupt journal line: cell 1 of experiment 0 is recorded twice\n");
}

TEST_CASE("SIGINT and SIGTERM stop between cells with exit 130 and 143 and the resume command") {
  Fixture f;
  for (const int signal : {SIGINT, SIGTERM}) {
    CAPTURE(signal);
    fs::remove(f.result);
    const auto child = spawn_cli({"run", f.config, "-j", "1", "-o", f.result}, f.dir);
    REQUIRE(wait_for_journal(f.journal, 3));
    ::kill(child.pid, signal);
    const auto r = wait_cli(child);
    CAPTURE(r.err);
    CHECK(r.exit_code == 128 + signal);
    CHECK_FALSE(fs::exists(f.result));
    const std::string command = std::string(SDPA_BENCH) + " run --resume " + f.journal;
    CHECK(r.err.find(" cells are in the journal; resume with:\n  " + command + "\n") !=
          std::string::npos);
    // The printed command is the one that finishes the run.
    const int status = std::system((emulated(command) + " >/dev/null 2>&1").c_str());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(records_of(slurp(f.result)) == f.reference);
    CHECK_FALSE(fs::exists(f.journal));
  }
}

TEST_CASE("a second interrupt stops at once and leaves a journal that resumes") {
  TempDir dir;
  // One cell of about a second, so both interrupts arrive while it runs.
#ifdef SDPA_SANITIZE
  const std::string trials = "100";
#else
  const std::string trials = "400";
#endif
  dir.write("slow.json", R"({"name": "slow", "seed": 1, "experiments": [{"name": "v",
    "kind": "variance", "d_k": 256, "n_q": 128, "n_kv": 128, "scale": "none", "trials": )" +
                             trials + "}]}");
  const std::string config = (dir / "slow.json").string(), result = (dir / "r.json").string();
  const auto child = spawn_cli({"run", config, "-j", "1", "-o", result}, dir);
  REQUIRE(wait_for_journal(result + ".journal", 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(child.pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto second = Clock::now();
  ::kill(child.pid, SIGINT);
  const auto r = wait_cli(child);
  CAPTURE(r.err);
  CHECK(r.exit_code == 130);
  CHECK(std::chrono::duration<double>(Clock::now() - second).count() < 0.5);
  CHECK(r.err.find("stopped; the journal keeps every finished cell; resume with:\n  ") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(result));
  const auto resumed = run_cli({"run", "--resume", result + ".journal"}, dir);
  CHECK(resumed.exit_code == 0);
  CHECK(fs::exists(result));
}

TEST_CASE("a resume whose config changed is refused, and the journal kept") {
  Fixture f;
  f.write_journal(4);
  std::string changed = kConfig;
  changed.replace(changed.find("\"trials\": 150"), 13, "\"trials\": 151");
  f.dir.write("kill.json", changed);
  for (const auto& args : {std::vector<std::string>{"run", f.config, "--resume", "-o", f.result},
                           std::vector<std::string>{"run", "--resume", f.journal}}) {
    const auto r = run_cli(args, f.dir);
    CHECK(r.exit_code == 2);
    CHECK(r.err.rfind("error: " + f.journal + ": the config changed since this run began: " +
                          f.config + " has SHA-256 " + sdpa::sha256_hex(changed).substr(0, 12),
                      0) == 0);
    CHECK(r.err.find("restore the config to resume, or remove the journal to start afresh") !=
          std::string::npos);
    CHECK(fs::exists(f.journal));
    CHECK_FALSE(fs::exists(f.result));
  }
}

TEST_CASE("a fresh run does not overwrite the journal of an interrupted one") {
  Fixture f;
  f.write_journal(2);
  const auto r = run_cli({"run", f.config, "-o", f.result}, f.dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find(f.journal + ": an interrupted run of " + f.result + " left this journal") !=
        std::string::npos);
  CHECK(slurp(f.journal).find(f.journal_line(1)) != std::string::npos);
}

TEST_CASE("run CONFIG --resume without -o continues the newest journal of that config") {
  Fixture f;
  // Run in a fresh folder, so results/<machine-id>/ is the test's own.
  const fs::path cwd = f.dir / "work";
  const fs::path folder = cwd / sdpa::default_result_folder();
  fs::create_directories(folder);
  fs::copy_file(f.config, cwd / "kill.json");
  const std::string newest = "kill-20260102T000000Z.json";
  // An older journal of another config, which must be left alone.
  std::ofstream(folder / "kill-20260101T000000Z.json.journal") << "{}\n";
  {
    sdpa::JournalHeader header;
    header.config_path = "kill.json";
    header.config_sha256 = sdpa::sha256_hex(kConfig);
    header.seed = 5;
    header.result = (fs::path(sdpa::default_result_folder()) / newest).string();
    header.started_at = "2026-01-02T00:00:00Z";
    auto writer = sdpa::JournalWriter::create((folder / newest).string() + ".journal", header);
    writer.append({0, 0, 0.01, f.reference[0][0]});
  }
  const auto r = run_cli({"run", "kill.json", "--resume"}, f.dir, cwd);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("1 of 28 cells done") != std::string::npos);
  CHECK(records_of(slurp(folder / newest)) == f.reference);
  CHECK_FALSE(fs::exists(folder / (newest + ".journal")));
  CHECK(fs::exists(folder / "kill-20260101T000000Z.json.journal"));

  // With no journal at all, --resume starts afresh and says so.
  const auto fresh = run_cli({"run", "kill.json", "--resume", "-o", "fresh.json"}, f.dir, cwd);
  CHECK(fresh.exit_code == 0);
  CHECK(fresh.err.rfind("no journal of an interrupted run of kill.json found; starting afresh\n",
                        0) == 0);
}

TEST_CASE("read_journal: the header, whole lines and a cut-off end") {
  TempDir dir;
  const std::string path = (dir / "j.journal").string();
  std::ofstream(path) << "";
  CHECK_THROWS_WITH_AS(sdpa::read_journal(path),
                       (path + ":1: corrupt journal: the file is empty").c_str(), sdpa::InputError);
  std::ofstream(path) << "{\"sdpa_bench_journal\": 2, \"config_pa";
  CHECK_THROWS_WITH_AS(
      sdpa::read_journal(path),
      (path + ":1: corrupt journal line: the line has no end (cut off mid-write)").c_str(),
      sdpa::InputError);
  const std::string sha = sdpa::sha256_hex("c");
  std::ofstream(path) << "{\"sdpa_bench_journal\": 2, \"config_path\": \"c.json\", "
                         "\"config_sha256\": \"" +
                             sha +
                             "\", \"seed\": 3, \"result\": \"r.json\", \"started_at\": "
                             "\"2026-01-01T00:00:00Z\", \"threads\": 2}\n" +
                             sdpa::journal_line({0, 4, 1.5, {{"x", 1}}}, sha) +
                             "\n{\"experiment\": 0, \"ce";
  const auto j = sdpa::read_journal(path);
  CHECK(j.header.config_path == "c.json");
  CHECK(j.header.seed == 3);
  CHECK(j.header.threads == 2);
  REQUIRE(j.entries.size() == 1);
  CHECK(j.entries[0].cell == 4);
  CHECK(j.entries[0].line == 2);
  CHECK(j.entries[0].record == sdpa::json({{"x", 1}}));
  CHECK(j.valid_bytes == slurp(path).rfind('\n') + 1);
  CHECK(j.warning == path +
                         ":3: the last line is cut off or corrupt (the line has no end (cut off "
                         "mid-write)); its cell is computed again");
}
