// Files a user names. Inputs (a config, a result file, a journal, an array) are refused
// before a byte is read when they are not regular files (a FIFO would block forever, a device
// never end) or too large to be one of ours. Outputs are checked before any work, so that a
// path that cannot be written costs nothing and leaves nothing behind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sdpa {

// Files larger than this are refused unread: no config, result file or journal of this suite
// comes near it, and reading one whole would exhaust memory.
inline constexpr std::uint64_t kMaxInputBytes = std::uint64_t(1) << 30;

// An input file, open for reading. open() throws InputError "<path>: cannot open <what>:
// <reason>", or "<path>: cannot read <what>: it is a FIFO, expected <expected>" for anything
// but a regular file (checked on the open file, without blocking on a FIFO).
class InputFile {
 public:
  static InputFile open(const std::string& path, const std::string& what,
                        const std::string& expected = "a file");
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&&) = delete;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  std::uint64_t size() const { return size_; }
  // Up to `bytes` bytes from `offset` (fewer at the end of the file). Throws InputError.
  std::string read(std::uint64_t offset, std::uint64_t bytes) const;
  // The same into `out`; returns how many bytes were read.
  std::uint64_t read_into(std::uint64_t offset, char* out, std::uint64_t bytes) const;

 private:
  InputFile(std::string path, std::string what, int fd, std::uint64_t size)
      : path_(std::move(path)), what_(std::move(what)), fd_(fd), size_(size) {}
  std::string path_, what_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The bytes of `path`. Throws InputError as InputFile::open does, or naming the size when it
// exceeds `max_bytes`. `what` names the file's role ("config", ...).
std::string read_input_file(const std::string& path, const std::string& what,
                            std::uint64_t max_bytes = kMaxInputBytes);

// A file a command reads or writes, and how messages name it: {"c.json", "the config"}.
struct NamedPath {
  std::string path, role;
};

// Checks an output file before any work: refused (InputError "<option> <path>: ...") when
// the path is empty, is a directory or another non-regular file, names the same file as one
// of `others` (the command's inputs and its other outputs), has a name too long for its file
// system (counting the temporary file it is written through), or lies in a folder that does
// not exist and cannot be created, or cannot be written. Creates nothing.
void check_output_file(const std::string& option, const std::string& path,
                       const std::vector<NamedPath>& others);

// The same for a folder a command writes `names` into (created if missing, with any of its
// own subfolders): refused when it is a file, cannot be created or written, or when a file it
// would write is one of `others`.
void check_output_folder(const std::string& option, const std::string& folder,
                         const std::vector<std::string>& names,
                         const std::vector<NamedPath>& others);

// "1.5 GiB", "12 MiB", "300 bytes": sizes in messages.
std::string human_bytes(double bytes);

}  // namespace sdpa
