// Bad input from a user (a config, a result file, an array file): the CLI prints the message
// and exits with code 2, having written nothing.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace sdpa {

struct InputError : std::runtime_error {
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
  // One line per problem, each "<file>: <json path>: <what was expected and found>".
  static InputError from_lines(const std::vector<std::string>& lines) {
    std::string joined;
    for (const auto& l : lines) joined += (joined.empty() ? "" : "\n") + l;
    return InputError(joined);
  }
};

}  // namespace sdpa
