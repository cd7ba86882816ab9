// Writing files so that a crash never leaves half of one.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "sdpa/experiments.hpp"

namespace sdpa {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error("cannot " + what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  // Every file to a temporary beside it, written and flushed; only then are they renamed into
  // place. A failure before the renames removes the temporaries and leaves nothing.
  std::vector<std::string> temps;
  auto remove_temps = [&temps] {
    for (const auto& t : temps) ::unlink(t.c_str());
  };
  for (const auto& [path, text] : files) {
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    fs::create_directories(dir, ec);
    std::string temp = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
    const int fd = mkstemp(temp.data());
    if (fd < 0) {
      const int error = errno;
      remove_temps();
      errno = error;
      fail("create a temporary file for", path);
    }
    temps.push_back(temp);
    const char* p = text.data();
    std::size_t left = text.size();
    bool ok = true;
    while (ok && left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      ok = n >= 0;
      if (ok) p += n, left -= static_cast<std::size_t>(n);
    }
    fchmod(fd, 0644);
    ok = ok && ::fsync(fd) == 0;
    ok = ::close(fd) == 0 && ok;
    if (!ok) {
      const int error = errno;
      remove_temps();
      errno = error;
      fail("write", temp);
    }
  }
  for (std::size_t i = 0; i < files.size(); ++i)
    if (std::rename(temps[i].c_str(), files[i].first.c_str()) != 0) {
      const int error = errno;
      for (std::size_t j = i; j < temps.size(); ++j) ::unlink(temps[j].c_str());
      errno = error;
      fail("rename into", files[i].first);
    }
  // The renames themselves are durable only once their folders are flushed.
  for (const auto& [path, text] : files) {
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }
}

void write_file_atomically(const std::string& path, const std::string& text) {
  write_files_atomically({{path, text}});
}

}  // namespace sdpa
