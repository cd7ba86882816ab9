#include "sdpa/input_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sdpa/input_error.hpp"

namespace sdpa {

std::string human_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) bytes /= 1024, ++unit;
  char buf[48];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.3g %s", bytes, units[unit]);
  return buf;
}

std::string read_input_file(const std::string& path, const std::string& what,
                            std::uint64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw InputError(path + ": cannot read " + what + ": it is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open " + what + ": " + std::strerror(errno));
  const auto size = fs::file_size(path, ec);
  if (!ec && size > max_bytes)
    throw InputError(path + ": refusing to read a " + what + " of " + human_bytes(double(size)) +
                     " (" + std::to_string(size) + " bytes); the limit is " +
                     human_bytes(double(max_bytes)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(path + ": cannot read " + what + ": " + std::strerror(errno));
  return text.str();
}

}  // namespace sdpa
