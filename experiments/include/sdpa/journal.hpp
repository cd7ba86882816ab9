// The journal of a run in progress, so that a long run survives interruption: beside the
// pending result file, `<result>.journal` holds a header line (config SHA-256, seed, result
// path) and then one JSON line per finished cell, each written whole and fsynced, each with a
// checksum of its contents keyed by the config's SHA-256. A resumed run skips the cells it
// holds; the journal is removed once the result file is written. The run writing a journal
// holds an exclusive lock on it (flock), so a second run is told that the first is alive.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sdpa/experiments.hpp"

namespace sdpa {

struct JournalHeader {
  std::string config_path;  // as the run was given it; `run --resume JOURNAL` loads it again
  std::string config_sha256;
  std::uint64_t seed = 0;
  std::string result;  // the result file the run will write
  std::string started_at;
  int threads = 1;
};

struct JournalEntry {            // NOLINT(bugprone-exception-escape): see sdpa::Config
  std::uint32_t experiment = 0;  // index in the config's list
  std::int64_t cell = 0;         // index in the experiment's grid
  double seconds = 0;            // how long the cell took
  json record;
  std::size_t line = 0;  // where it was read from (1 is the header), for messages
};

struct JournalContents {
  JournalHeader header;
  std::vector<JournalEntry> entries;
  std::uint64_t valid_bytes = 0;  // the whole lines; anything after is a cut-off last line
  std::string warning;            // why a last line was dropped, empty when none was
};

// 2: lines carry a checksum; the header is checked against a schema.
inline constexpr int kJournalVersion = 2;

// "<result>.journal".
std::string journal_path_for(const std::string& result_path);

// True for a path that names a journal rather than a config.
bool is_journal_path(const std::string& path);

// Reads a journal. A cut-off or corrupt last line (the cell being written when the run was
// killed) is dropped and described in `warning`, so that cell is computed again; a bad line
// anywhere else (bad JSON, a header or line that does not match the journal's schema, a
// checksum that does not match) is an InputError naming the file and the line.
JournalContents read_journal(const std::string& path);
// The same on a journal's text; `path` only labels messages.
JournalContents parse_journal(const std::string& path, const std::string& text);

// The finished cells of a journal, by (experiment, cell), checked against the config it is
// resumed with: the header's SHA-256 and seed, and each line's cell in the plan with the
// record of that cell (its index and parameters). Throws InputError naming the file and line.
std::map<std::pair<std::uint32_t, std::int64_t>, JournalEntry> journal_cells(
    const std::string& path, const JournalContents& contents, const Config& config,
    const std::vector<ExperimentPlan>& plans);

// The line a journal holds for `entry` (without its newline), with its checksum keyed by the
// config's SHA-256.
std::string journal_line(const JournalEntry& entry, const std::string& config_sha256);

// True when a run holds the journal's lock: it is writing the journal now.
bool journal_is_live(const std::string& path);

// Appends cells to a journal, one line each, written with one write() and fsynced; holds the
// journal's lock until destroyed.
class JournalWriter {
 public:
  // Creates the journal with its header line, atomically: it never exists without one, and
  // it is locked from the moment it appears. Throws InputError if it exists.
  static JournalWriter create(const std::string& path, const JournalHeader& header);
  // Opens an existing journal to append and locks it; throws InputError when another run
  // holds it. Read the journal once it is locked, then continue_after() what was read.
  static JournalWriter reopen(const std::string& path);
  // Cuts the journal back to the whole lines of `contents`, so that a cut-off last line is
  // replaced rather than continued; lines appended after are keyed by its header.
  void continue_after(const JournalContents& contents);
  // Removes the journal (the run is complete), still holding its lock.
  void remove();

  JournalWriter(JournalWriter&& other) noexcept;
  JournalWriter& operator=(JournalWriter&&) = delete;
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;
  ~JournalWriter();

  void append(const JournalEntry& entry);

 private:
  JournalWriter(std::string path, std::string config_sha256, int fd)
      : path_(std::move(path)), config_sha256_(std::move(config_sha256)), fd_(fd) {}
  std::string path_, config_sha256_;
  int fd_ = -1;
};

// The journal `run CONFIG --resume` continues: "<output>.journal" when an output is given,
// else the most recent "<config name>-<UTC time>.json.journal" in the default result folder.
// Empty when there is none.
std::string find_journal(const Config& config, const std::string& output);

}  // namespace sdpa
