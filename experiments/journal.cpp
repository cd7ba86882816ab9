// The journal of a run in progress: written a line at a time with fsync, read back on resume.
#include "sdpa/journal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

JournalHeader parse_header(const json& line) {
  if (!line.is_object() || line.value("sdpa_bench_journal", 0) != kJournalVersion)
    throw std::invalid_argument("expected a journal header {\"sdpa_bench_journal\": " +
                                std::to_string(kJournalVersion) + ", ...}");
  JournalHeader h;
  h.config_path = line.at("config_path").get<std::string>();
  h.config_sha256 = line.at("config_sha256").get<std::string>();
  h.seed = line.at("seed").get<std::uint64_t>();
  h.result = line.at("result").get<std::string>();
  h.started_at = line.at("started_at").get<std::string>();
  h.threads = line.at("threads").get<int>();
  return h;
}

JournalEntry parse_entry(const json& line) {
  if (!line.is_object() || !line.contains("record") || !line["record"].is_object())
    throw std::invalid_argument("expected {\"experiment\", \"cell\", \"seconds\", \"record\"}");
  JournalEntry e;
  e.experiment = line.at("experiment").get<std::uint32_t>();
  e.cell = line.at("cell").get<std::int64_t>();
  e.seconds = line.at("seconds").get<double>();
  e.record = line["record"];
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

}  // namespace

std::string journal_path_for(const std::string& result_path) { return result_path + kSuffix; }

bool is_journal_path(const std::string& path) { return path.ends_with(kSuffix); }

JournalContents read_journal(const std::string& path) {
  const std::string text = read_input_file(path, "journal");
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
      const json line =
          json::parse(text.begin() + std::ptrdiff_t(begin), text.begin() + std::ptrdiff_t(end));
      if (line_number == 1) {
        contents.header = parse_header(line);
      } else {
        contents.entries.push_back(parse_entry(line));
        contents.entries.back().line = line_number;
      }
    } catch (const std::exception& e) {  // json's parse and type errors, and ours
      problem = json_error_message(e);
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

JournalWriter JournalWriter::create(const std::string& path, const JournalHeader& header) {
  const json line = {{"sdpa_bench_journal", kJournalVersion},
                     {"config_path", header.config_path},
                     {"config_sha256", header.config_sha256},
                     {"seed", header.seed},
                     {"result", header.result},
                     {"started_at", header.started_at},
                     {"threads", header.threads}};
  write_file_atomically(path, line.dump() + "\n");
  return reopen(path, line.dump().size() + 1);
}

JournalWriter JournalWriter::reopen(const std::string& path, std::uint64_t valid_bytes) {
  if (::truncate(path.c_str(), static_cast<off_t>(valid_bytes)) != 0) fail("cut back", path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) fail("open", path);
  return {path, fd};
}

JournalWriter::JournalWriter(JournalWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JournalWriter::append(const JournalEntry& entry) {
  const json line = {{"experiment", entry.experiment},
                     {"cell", entry.cell},
                     {"seconds", entry.seconds},
                     {"record", entry.record}};
  // One write() per line: a kill leaves at most the last line cut off, never a gap.
  write_whole(fd_, line.dump() + "\n", path_);
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
