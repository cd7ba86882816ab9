// The journal of a run in progress, so that a long run survives interruption: beside the
// pending result file, `<result>.journal` holds a header line (config SHA-256, seed, result
// path) and then one JSON line per finished cell, each written whole and fsynced. A resumed
// run skips the cells it holds; the journal is removed once the result file is written.
#pragma once

#include <cstdint>
#include <string>
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

inline constexpr int kJournalVersion = 1;

// "<result>.journal".
std::string journal_path_for(const std::string& result_path);

// True for a path that names a journal rather than a config.
bool is_journal_path(const std::string& path);

// Reads a journal. A cut-off or corrupt last line (the cell being written when the run was
// killed) is dropped and described in `warning`, so that cell is computed again; a bad line
// anywhere else is an InputError naming the file and the line.
JournalContents read_journal(const std::string& path);

// Appends cells to a journal, one line each, written with one write() and fsynced.
class JournalWriter {
 public:
  // Creates the journal with its header line, atomically: it never exists without one.
  static JournalWriter create(const std::string& path, const JournalHeader& header);
  // Opens an existing journal to append, first cutting it back to `valid_bytes` so that a
  // cut-off last line is replaced rather than continued.
  static JournalWriter reopen(const std::string& path, std::uint64_t valid_bytes);

  JournalWriter(JournalWriter&& other) noexcept;
  JournalWriter& operator=(JournalWriter&&) = delete;
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;
  ~JournalWriter();

  void append(const JournalEntry& entry);

 private:
  JournalWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

// The journal `run CONFIG --resume` continues: "<output>.journal" when an output is given,
// else the most recent "<config name>-<UTC time>.json.journal" in the default result folder.
// Empty when there is none.
std::string find_journal(const Config& config, const std::string& output);

}  // namespace sdpa
