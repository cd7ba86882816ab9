#include "sdpa/json_read.hpp"

#include "sdpa/json_schema.hpp"

namespace sdpa {

double number_in(const json& node) {
  if (!node.is_number()) throw JsonTypeError{&node, "a number"};
  return node.get<double>();
}

double cache_size_bytes(const std::string& size) {
  std::size_t digits = 0;
  while (digits < size.size() && digits < 15 && size[digits] >= '0' && size[digits] <= '9')
    ++digits;
  const std::string unit = size.substr(digits);
  if (digits == 0 || (unit != "K" && unit != "M" && unit != "G")) return 0;
  return std::stod(size.substr(0, digits)) * (unit == "K"   ? 1024.0
                                              : unit == "M" ? 1024.0 * 1024
                                                            : 1024.0 * 1024 * 1024);
}

std::optional<std::string> pointer_to(const json& root, const json* node) {
  if (&root == node) return "";
  const auto escaped = [](std::string key) {
    for (std::size_t at = 0; (at = key.find_first_of("~/", at)) != std::string::npos; at += 2)
      key.replace(at, 1, key[at] == '~' ? "~0" : "~1");
    return key;
  };
  // Documents are refused past kMaxJsonDepth levels, so the recursion is bounded.
  if (root.is_object())
    for (auto it = root.begin(); it != root.end(); ++it)
      if (auto below = pointer_to(*it, node)) return "/" + escaped(it.key()) + *below;
  if (root.is_array())
    for (std::size_t i = 0; i < root.size(); ++i)
      if (auto below = pointer_to(root[i], node)) return "/" + std::to_string(i) + *below;
  return std::nullopt;
}

namespace {

std::string file_names(const std::vector<NamedJson>& files) {
  std::string names;
  for (const auto& f : files) names += (names.empty() ? "" : ", ") + f.file;
  return names;
}

}  // namespace

std::string located(const std::vector<NamedJson>& files, const json* node) {
  for (const auto& f : files)
    if (auto path = pointer_to(*f.doc, node)) return f.file + ": " + *path;
  return file_names(files);
}

InputError type_error_in(const std::vector<NamedJson>& files, const JsonTypeError& bad,
                         const std::string& why) {
  return InputError(located(files, bad.node) + ": expected " + bad.expected + ", found " +
                    describe_found(*bad.node) + (why.empty() ? "" : " (" + why + ")"));
}

InputError json_library_error(const std::vector<NamedJson>& files, const std::string& what,
                              const std::exception& e) {
  return InputError(file_names(files) + ": " + what +
                    ": a value of an unexpected type: " + json_error_message(e));
}

}  // namespace sdpa
