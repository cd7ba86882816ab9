// Reading a user's file whole (a config, a result file, a journal), refused before reading
// when it is not a file or too large to be one of ours.
#pragma once

#include <cstdint>
#include <string>

namespace sdpa {

// Files larger than this are refused unread: no config, result file or journal of this suite
// comes near it, and reading one whole would exhaust memory.
inline constexpr std::uint64_t kMaxInputBytes = std::uint64_t(1) << 30;

// The bytes of `path`. Throws InputError "<path>: cannot open <what>: <reason>", or naming
// the size when it exceeds `max_bytes`. `what` names the file's role ("config", ...).
std::string read_input_file(const std::string& path, const std::string& what,
                            std::uint64_t max_bytes = kMaxInputBytes);

// "1.5 GiB", "12 MiB", "300 bytes": sizes in messages.
std::string human_bytes(double bytes);

}  // namespace sdpa
