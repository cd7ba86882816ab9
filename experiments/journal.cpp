// The journal of a run in progress: written a line at a time with fsync under a lock, read
// back and checked on resume.
#include "sdpa/journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "sdpa/input_file.hpp"
#include "sdpa/json_schema.hpp"

namespace sdpa {
namespace {

constexpr const char* kSuffix = ".journal";

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error("cannot " + what + " " + path + ": " + std::strerror(errno));
}

// What a journal's lines must be. The thread count takes the config's own limits.
const JsonSchema& header_schema() {
  static const JsonSchema schema([] {
    json threads = config_schema()["properties"]["threads"];
    return json{
        {"type", "object"},
        {"additionalProperties", false},
        {"required",
         {"sdpa_bench_journal", "config_path", "config_sha256", "seed", "result", "started_at",
          "threads"}},
        {"properties",
         {{"sdpa_bench_journal", {{"const", kJournalVersion}}},
          {"config_path",
           {{"type", "string"}, {"minLength", 1}, {"description", "the config's path"}}},
          {"config_sha256",
           {{"type", "string"},
            {"pattern", "^[0-9a-f]{64}$"},
            {"description", "a SHA-256 digest (64 hexadecimal digits)"}}},
          {"seed", config_schema()["properties"]["seed"]},
          {"result",
           {{"type", "string"}, {"minLength", 1}, {"description", "the result file's path"}}},
          {"started_at",
           {{"type", "string"},
            {"pattern", "^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]Z$"},
            {"description", "a UTC time such as \"2026-01-31T12:00:00Z\""}}},
          {"threads", threads}}}}
        .dump();
  }());
  return schema;
}

const JsonSchema& entry_schema() {
  static const JsonSchema schema(R"schema({
    "type": "object", "additionalProperties": false,
    "required": ["experiment", "cell", "seconds", "record", "sha256"],
    "properties": {
      "experiment": {"type": "integer", "minimum": 0, "maximum": 4294967295,
                     "description": "an experiment's index in the config"},
      "cell": {"type": "integer", "minimum": 0, "description": "a cell's index in its grid"},
      "seconds": {"type": "number", "minimum": 0, "description": "a non-negative number"},
      "record": {"type": "object", "description": "the cell's record (an object)"},
      "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$",
                 "description": "the line's checksum (64 hexadecimal digits)"}
    }})schema");
  return schema;
}

// The first problem of `line` against `schema`, or "".
std::string schema_problem(const JsonSchema& schema, const json& line) {
  const auto problems = schema.problems(line);
  return problems.empty() ? "" : problems.front();
}

JournalHeader parse_header(const json& line) {
  if (!line.is_object() || !line.contains("sdpa_bench_journal"))
    throw std::invalid_argument("expected a journal header {\"sdpa_bench_journal\": " +
                                std::to_string(kJournalVersion) + ", ...}");
  if (line["sdpa_bench_journal"] != kJournalVersion)
    throw std::invalid_argument(
        "/sdpa_bench_journal: expected journal version " + std::to_string(kJournalVersion) +
        ", found " + describe_found(line["sdpa_bench_journal"]) +
        " (written by another version of sdpa-bench: remove the journal to start afresh)");
  if (const std::string p = schema_problem(header_schema(), line); !p.empty())
    throw std::invalid_argument(p);
  JournalHeader h;
  h.config_path = line["config_path"];
  h.config_sha256 = line["config_sha256"];
  h.seed = line["seed"];
  h.result = line["result"];
  h.started_at = line["started_at"];
  h.threads = line["threads"];
  return h;
}

// What a line's checksum covers: the config's SHA-256 and the line without its checksum.
std::string checksum(const JournalEntry& e, const std::string& config_sha256) {
  const json body = {
      {"experiment", e.experiment}, {"cell", e.cell}, {"seconds", e.seconds}, {"record", e.record}};
  return sha256_hex(config_sha256 + "\n" + body.dump());
}

JournalEntry parse_entry(const json& line, const std::string& config_sha256) {
  if (const std::string p = schema_problem(entry_schema(), line); !p.empty())
    throw std::invalid_argument(p);
  JournalEntry e;
  e.experiment = line["experiment"];
  e.cell = line["cell"];
  e.seconds = line["seconds"];
  e.record = line["record"];
  if (checksum(e, config_sha256) != line["sha256"])
    throw std::invalid_argument(
        "/sha256: the checksum does not match the line's contents (edited or damaged)");
  return e;
}

void write_whole(int fd, const std::string& text, const std::string& path) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write", path);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

[[noreturn]] void refuse_live(const std::string& path) {
  throw InputError(path +
                   ": another run is writing this journal now (it holds its lock); wait for it "
                   "to finish or stop it, or give this run another -o");
}

// Takes the journal's lock without waiting; false when another run holds it.
bool try_lock(int fd, const std::string& path) {
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return false;
    if (errno != EINTR) fail("lock", path);
  }
  return true;
}

}  // namespace

std::string journal_path_for(const std::string& result_path) { return result_path + kSuffix; }

bool is_journal_path(const std::string& path) { return path.ends_with(kSuffix); }

std::string journal_line(const JournalEntry& entry, const std::string& config_sha256) {
  return json{{"experiment", entry.experiment},
              {"cell", entry.cell},
              {"seconds", entry.seconds},
              {"record", entry.record},
              {"sha256", checksum(entry, config_sha256)}}
      .dump();
}

JournalContents read_journal(const std::string& path) {
  return parse_journal(path, read_input_file(path, "journal"));
}

JournalContents parse_journal(const std::string& path, const std::string& text) {
  JournalContents contents;
  std::size_t begin = 0, line_number = 0;
  while (begin < text.size()) {
    ++line_number;
    const std::size_t newline = text.find('\n', begin);
    const bool whole = newline != std::string::npos;
    const std::size_t end = whole ? newline : text.size();
    const bool last = !whole || end + 1 == text.size();
    const std::string where = path + ":" + std::to_string(line_number) + ": ";
    std::string problem;
    try {
      if (!whole) throw std::invalid_argument("the line has no end (cut off mid-write)");
      const json line = parse_json_text(text.substr(begin, end - begin));
      if (line_number == 1) {
        contents.header = parse_header(line);
      } else {
        contents.entries.push_back(parse_entry(line, contents.header.config_sha256));
        contents.entries.back().line = line_number;
      }
    } catch (const JsonTextError& e) {
      // A position within the line is "1:<column>".
      const std::string at = e.where.rfind("1:", 0) == 0 ? "column " + e.where.substr(2) : e.where;
      problem = (at.empty() ? "" : at + ": ") + e.message;
    } catch (const std::invalid_argument& e) {
      problem = e.what();
    }
    if (!problem.empty()) {
      // A header is written atomically, so a bad one is corruption, never a cut-off line.
      if (!last || line_number == 1) throw InputError(where + "corrupt journal line: " + problem);
      contents.warning = where + "the last line is cut off or corrupt (" + problem +
                         "); its cell is computed again";
      break;
    }
    contents.valid_bytes = end + 1;
    begin = end + 1;
  }
  if (line_number == 0) throw InputError(path + ":1: corrupt journal: the file is empty");
  return contents;
}

std::map<std::pair<std::uint32_t, std::int64_t>, JournalEntry> journal_cells(
    const std::string& path, const JournalContents& contents, const Config& config,
    const std::vector<ExperimentPlan>& plans) {
  const JournalHeader& h = contents.header;
  if (h.config_sha256 != config.sha256)
    throw InputError(path + ": the config changed since this run began: " + config.path +
                     " has SHA-256 " + config.sha256.substr(0, 12) + "..., the journal expects " +
                     h.config_sha256.substr(0, 12) +
                     "...; restore the config to resume, or remove the journal to start afresh");
  if (h.seed != config.seed)
    throw InputError(path + ": the journal's seed " + std::to_string(h.seed) +
                     " differs from the config's " + std::to_string(config.seed));
  std::map<std::pair<std::uint32_t, std::int64_t>, JournalEntry> done;
  for (const auto& e : contents.entries) {
    const std::string where = path + ":" + std::to_string(e.line) + ": corrupt journal line: ";
    const std::string which =
        "cell " + std::to_string(e.cell) + " of experiment " + std::to_string(e.experiment);
    if (e.experiment >= plans.size() || std::size_t(e.cell) >= plans[e.experiment].cells.size())
      throw InputError(where + which + " is not in the config's plan");
    // The record must be that cell's: the runner starts each with the cell's index and the
    // values of the kind's axes.
    const ExperimentPlan& plan = plans[e.experiment];
    const Cell& cell = plan.cells[std::size_t(e.cell)];
    json params = json::object();
    for (const auto& axis : plan.kind->axes) params[axis] = cell.params[axis];
    if (e.record.value("cell", json()) != e.cell || e.record.value("params", json()) != params)
      throw InputError(where + "its record is not that of " + which +
                       " (its cell index or parameters differ from the plan's)");
    if (!done.emplace(std::pair{e.experiment, e.cell}, e).second)
      throw InputError(where + which + " is recorded twice");
  }
  return done;
}

bool journal_is_live(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const bool live = !try_lock(fd, path);
  ::close(fd);  // releases the lock if it was taken
  return live;
}

JournalWriter JournalWriter::create(const std::string& path, const JournalHeader& header) {
  const json line = {{"sdpa_bench_journal", kJournalVersion},
                     {"config_path", header.config_path},
                     {"config_sha256", header.config_sha256},
                     {"seed", header.seed},
                     {"result", header.result},
                     {"started_at", header.started_at},
                     {"threads", header.threads}};
  // Written and locked under a temporary name, then linked into place: the journal appears
  // whole and locked, and link() fails rather than replace one that appeared meanwhile.
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::create_directories(dir);
  std::string temp = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) fail("create a temporary file for", path);
  JournalWriter writer(path, header.config_sha256, fd);
  bool linked = false;
  int link_error = 0;
  try {
    try_lock(fd, temp);
    ::fchmod(fd, 0644);
    write_whole(fd, line.dump() + "\n", temp);
    if (::fsync(fd) != 0) fail("flush", temp);
    linked = ::link(temp.c_str(), path.c_str()) == 0;
    link_error = errno;
    // A file system without hard links: a rename, which replaces rather than fails, after a
    // last look (a race with another run is then possible, not a half journal).
    if (!linked && link_error != EEXIST && !fs::exists(path)) {
      linked = std::rename(temp.c_str(), path.c_str()) == 0;
      link_error = errno;
    }
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  ::unlink(temp.c_str());
  if (!linked && link_error == EEXIST)
    throw InputError(path + ": another run created this journal a moment ago");
  errno = link_error;
  if (!linked) fail("create", path);
  if (const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY); dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  ::lseek(fd, 0, SEEK_END);
  return writer;
}

JournalWriter JournalWriter::reopen(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open journal: " + std::strerror(errno));
  JournalWriter writer(path, "", fd);
  if (!try_lock(fd, path)) refuse_live(path);
  return writer;
}

void JournalWriter::continue_after(const JournalContents& contents) {
  config_sha256_ = contents.header.config_sha256;
  if (::ftruncate(fd_, static_cast<off_t>(contents.valid_bytes)) != 0) fail("cut back", path_);
}

void JournalWriter::remove() {
  if (::unlink(path_.c_str()) != 0) fail("remove", path_);
}

JournalWriter::JournalWriter(JournalWriter&& other) noexcept
    : path_(std::move(other.path_)),
      config_sha256_(std::move(other.config_sha256_)),
      fd_(std::exchange(other.fd_, -1)) {}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JournalWriter::append(const JournalEntry& entry) {
  // One write() per line: a kill leaves at most the last line cut off, never a gap.
  write_whole(fd_, journal_line(entry, config_sha256_) + "\n", path_);
  if (::fsync(fd_) != 0) fail("flush", path_);
}

std::string find_journal(const Config& config, const std::string& output) {
  namespace fs = std::filesystem;
  if (!output.empty()) {
    const std::string path = journal_path_for(output);
    return fs::exists(path) ? path : "";
  }
  // "<name>-<UTC time>.json.journal": the time sorts as text, so the greatest name is newest.
  const std::string prefix = config.name + "-", suffix = std::string(".json") + kSuffix;
  const std::string folder = default_result_folder();
  std::error_code ec;
  std::string newest;
  for (const auto& f : fs::directory_iterator(folder, ec)) {
    const std::string name = f.path().filename().string();
    const std::size_t stamp_length = std::string_view("YYYYMMDDTHHMMSSZ").size();
    if (name.size() != prefix.size() + stamp_length + suffix.size() || !name.starts_with(prefix) ||
        !name.ends_with(suffix))
      continue;
    if (newest.empty() || name > newest) newest = name;
  }
  return newest.empty() ? "" : (fs::path(folder) / newest).string();
}

}  // namespace sdpa
