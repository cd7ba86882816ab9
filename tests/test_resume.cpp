// Long runs survive interruption: killed at random points, interrupted, or resumed from a
// damaged journal, a run resumed with --resume ends with the records of an uninterrupted run,
// and no result file exists before the run completes.
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <random>

#include "cli_runner.hpp"
#include "sdpa/experiments.hpp"
#include "sdpa/journal.hpp"

using namespace sdpa::testing;  // the CLI runner and file helpers of cli_runner.hpp
namespace fs = std::filesystem;

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
  sdpa::json reference;  // records of an uninterrupted run

  Fixture() {
    dir.write("kill.json", kConfig);
    const auto r = run_cli({"run", config, "-j", "1", "-o", (dir / "ref.json").string()}, dir);
    REQUIRE(r.exit_code == 0);
    reference = records_of(slurp(dir / "ref.json"));
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

// The environment that holds a run after computing its `cell`-th cell until `interrupts`
// interrupts arrive (experiments/runner.cpp, SDPA_TEST_HOLD), and the line it says so with.
std::vector<std::string> hold_at(std::size_t cell, int interrupts) {
  return {"SDPA_TEST_HOLD=" + std::to_string(cell) + ":" + std::to_string(interrupts)};
}
const std::string kHeld = "sdpa-bench: held after computing cell ";

}  // namespace

// The release build covers the kill points (24); the sanitized build, whose runs start several
// times slower, checks the same paths at fewer of them.
#ifdef SDPA_SANITIZE
constexpr int kKillPoints = 8;
#else
constexpr int kKillPoints = 24;
#endif

TEST_CASE("killed with SIGKILL at random points, a resumed run ends with the same records") {
  Fixture f;
  // Kill points from a fixed seed: the same on every run of the test. Most are a random cell,
  // killed when its record is computed and not yet journaled (the run holds there, told to by
  // SDPA_TEST_HOLD, so no kill depends on how fast the machine is); every eighth run is killed
  // as soon as it is started, wherever its start has got to.
  std::mt19937 rng(20261122);
  for (int i = 0; i < kKillPoints; ++i) {
    CAPTURE(i);
    fs::remove(f.result);
    fs::remove(f.journal);
    std::size_t journaled = 0;  // cells in the journal
    // Every other time the resumed run is killed too, so a journal is resumed twice.
    for (int kill = 0; kill < 1 + i % 2; ++kill) {
      const bool while_starting = kill == 0 && i % 8 == 0;
      const std::size_t cell = std::uniform_int_distribution<std::size_t>(0, 27 - journaled)(rng);
      CAPTURE(cell);
      const std::vector<std::string> args =
          kill == 0 ? std::vector<std::string>{"run", f.config, "-j", "1", "-o", f.result}
                    : std::vector<std::string>{"run", f.config, "--resume", "-o", f.result};
      const auto child = spawn_cli(args, f.dir, {},
                                   while_starting ? std::vector<std::string>{} : hold_at(cell, 2));
      if (!while_starting) REQUIRE(wait_for_text(child.err, kHeld + std::to_string(cell), child));
      ::kill(child.pid, SIGKILL);
      const auto r = wait_cli(child);
      CHECK(r.signal == SIGKILL);
      CHECK_FALSE(fs::exists(f.result));  // a result file appears only as the run completes
      if (!while_starting) {
        journaled += cell;  // the held cell was computed, not journaled
        const std::string text = slurp(f.journal);
        CHECK(std::size_t(std::count(text.begin(), text.end(), '\n')) == 1 + journaled);
      }
    }
    f.check_complete(f.resume());
  }
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
    // The signal arrives while cell 3 runs (held there until it does): cell 3 is finished.
    const auto child =
        spawn_cli({"run", f.config, "-j", "1", "-o", f.result}, f.dir, {}, hold_at(3, 1));
    REQUIRE(wait_for_text(child.err, kHeld + "3", child));
    ::kill(child.pid, signal);
    const auto r = wait_cli(child);
    CAPTURE(r.err);
    CHECK(r.exit_code == 128 + signal);
    CHECK_FALSE(fs::exists(f.result));
    const std::string command = std::string(SDPA_BENCH) + " run --resume " + f.journal;
    CHECK(r.err.find("interrupted; 4 of 28 cells are in the journal; resume with:\n  " + command +
                     "\n") != std::string::npos);
    // The printed command is the one that finishes the run.
    const int status = std::system((emulated(command) + " >/dev/null 2>&1").c_str());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(records_of(slurp(f.result)) == f.reference);
    CHECK_FALSE(fs::exists(f.journal));
  }
}

TEST_CASE("a second interrupt stops at once and leaves a journal that resumes") {
  Fixture f;
  // Held in cell 2 until the process ends: only the second interrupt can end it.
  const auto child =
      spawn_cli({"run", f.config, "-j", "1", "-o", f.result}, f.dir, {}, hold_at(2, 2));
  REQUIRE(wait_for_text(child.err, kHeld + "2", child));
  ::kill(child.pid, SIGINT);
  REQUIRE(wait_for_text(child.err, "interrupted; finishing the current cell", child));
  ::kill(child.pid, SIGINT);
  const auto r = wait_cli(child);
  CAPTURE(r.err);
  CHECK(r.exit_code == 130);
  CHECK(r.err.find("stopped; the journal keeps every finished cell; resume with:\n  ") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(f.result));
  const std::string text = slurp(f.journal);
  CHECK(std::count(text.begin(), text.end(), '\n') == 1 + 2);  // cells 0 and 1
  const auto resumed = run_cli({"run", "--resume", f.journal}, f.dir);
  CHECK(resumed.exit_code == 0);
  CHECK(records_of(slurp(f.result)) == f.reference);
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
