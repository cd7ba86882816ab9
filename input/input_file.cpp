#include "sdpa/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "sdpa/input_error.hpp"

namespace sdpa {
namespace fs = std::filesystem;
namespace {

// What a file that is not a regular file is, for messages.
std::string type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ea, eb;
  if (fs::exists(a, ea) && fs::exists(b, eb)) return fs::equivalent(a, b, ea);
  const fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  if (!ea && !eb) return ca == cb;
  return fs::absolute(a, ea).lexically_normal() == fs::absolute(b, eb).lexically_normal();
}

// A file is written through ".<name>.XXXXXX" beside it (write_file_atomically).
constexpr std::size_t kTemporaryExtra = 8;

// Why `path` cannot be one of the files a command writes, or "" when it can (its folder
// aside).
std::string file_problem(const fs::path& path, const std::vector<NamedPath>& others) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return "it is " + type_name(st.st_mode) + ", expected a regular file";
  for (const auto& other : others)
    if (!other.path.empty() && same_file(path, other.path))
      return "it is " + other.role + " (" + other.path + "); choose another file";
  const std::string name = path.filename().string();
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  long name_max = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = NAME_MAX;
  if (name.size() + kTemporaryExtra > std::size_t(name_max))
    return "its name is " + std::to_string(name.size()) + " bytes long, expected at most " +
           std::to_string(std::size_t(name_max) - kTemporaryExtra) +
           " (the file system's limit, less the temporary file's " +
           std::to_string(kTemporaryExtra) + ")";
  if (fs::absolute(path).string().size() + kTemporaryExtra >= PATH_MAX)
    return "the path is " + std::to_string(fs::absolute(path).string().size()) +
           " bytes long, expected less than " + std::to_string(PATH_MAX - kTemporaryExtra);
  return "";
}

// Why files cannot be written into `folder` (created if missing), or "": its deepest existing
// ancestor must be a folder in which a file can be created. Probed by creating and removing
// one, since permissions alone do not tell (a read-only or virtual file system, root).
std::string folder_problem(const fs::path& folder) {
  fs::path existing = folder.empty() ? fs::path(".") : folder;
  std::error_code ec;
  while (!fs::exists(existing, ec) && existing.has_parent_path() &&
         existing.parent_path() != existing)
    existing = existing.parent_path();
  if (!fs::exists(existing, ec)) existing = ".";
  if (!fs::is_directory(existing, ec))
    return existing.string() + " is not a folder, so " + folder.string() + " cannot be created";
  for (const auto& part : folder)
    if (part.string().size() > NAME_MAX)
      return "the folder name " + part.string().substr(0, 20) + "... is " +
             std::to_string(part.string().size()) + " bytes long, expected at most " +
             std::to_string(NAME_MAX);
  std::string probe = (existing / ".sdpa-bench-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) return "cannot create files in " + existing.string() + ": " + std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

[[noreturn]] void refuse(const std::string& option, const std::string& path,
                         const std::string& problem) {
  throw InputError(option + " " + path + ": " + problem);
}

void check_not_empty(const std::string& option, const std::string& path, const char* expected) {
  if (path.empty()) throw InputError(option + ": expected " + expected + ", found an empty string");
}

}  // namespace

std::string human_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) bytes /= 1024, ++unit;
  char buf[48];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.3g %s", bytes, units[unit]);
  return buf;
}

InputFile InputFile::open(const std::string& path, const std::string& what,
                          const std::string& expected) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one; the
  // type is then checked on the open file, so nothing can swap it in between.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EISDIR)
      throw InputError(path + ": cannot read " + what + ": it is a directory, expected " +
                       expected);
    throw InputError(path + ": cannot open " + what + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int saved = errno;
    ::close(fd);
    if (!S_ISREG(st.st_mode) && st.st_mode != 0)
      throw InputError(path + ": cannot read " + what + ": it is " + type_name(st.st_mode) +
                       ", expected " + expected);
    throw InputError(path + ": cannot open " + what + ": " + std::strerror(saved));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return {path, what, fd, std::uint64_t(st.st_size)};
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)),
      what_(std::move(other.what_)),
      fd_(std::exchange(other.fd_, -1)),
      size_(other.size_) {}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t InputFile::read_into(std::uint64_t offset, char* out, std::uint64_t bytes) const {
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(path_ + ": cannot read " + what_ + ": " + std::strerror(errno));
    if (n == 0) break;
    done += std::uint64_t(n);
  }
  return done;
}

std::string InputFile::read(std::uint64_t offset, std::uint64_t bytes) const {
  std::string out(bytes, '\0');
  out.resize(read_into(offset, out.data(), bytes));
  return out;
}

std::string read_input_file(const std::string& path, const std::string& what,
                            std::uint64_t max_bytes) {
  const InputFile file = InputFile::open(path, what);
  if (file.size() > max_bytes)
    throw InputError(path + ": refusing to read a " + what + " of " +
                     human_bytes(double(file.size())) + " (" + std::to_string(file.size()) +
                     " bytes); the limit is " + human_bytes(double(max_bytes)));
  // One byte past the size: a file that grows while it is read is read to the limit's end.
  std::string text = file.read(0, std::min(max_bytes + 1, file.size() + 1));
  if (text.size() > max_bytes)
    throw InputError(path + ": refusing to read a " + what + " that grew past " +
                     human_bytes(double(max_bytes)) + " while being read");
  return text;
}

void check_output_file(const std::string& option, const std::string& path,
                       const std::vector<NamedPath>& others) {
  check_not_empty(option, path, "a file name");
  if (path.back() == '/') refuse(option, path, "expected a file name, found a folder's");
  if (const std::string p = file_problem(path, others); !p.empty()) refuse(option, path, p);
  const fs::path p(path);
  if (const std::string f = folder_problem(p.has_parent_path() ? p.parent_path() : fs::path("."));
      !f.empty())
    refuse(option, path, f);
}

void check_output_folder(const std::string& option, const std::string& folder,
                         const std::vector<std::string>& names,
                         const std::vector<NamedPath>& others) {
  check_not_empty(option, folder, "a folder name");
  std::error_code ec;
  if (fs::exists(folder, ec) && !fs::is_directory(folder, ec))
    refuse(option, folder, "it is a file, expected a folder");
  if (const std::string f = folder_problem(folder); !f.empty()) refuse(option, folder, f);
  for (const auto& name : names) {
    const fs::path file = fs::path(folder) / name;
    if (const std::string p = file_problem(file, others); !p.empty())
      refuse(option, folder, file.string() + ": " + p);
  }
}

}  // namespace sdpa
