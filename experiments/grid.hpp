// A grid parameter of a config: one value, or a non-empty list of values that the plan crosses
// with the other lists. The plan, the config's checks and the kinds' checks read them this way.
#pragma once

#include <string>

#include "sdpa/json.hpp"

namespace sdpa {

// A grid parameter's values: the list itself, or the single value as a list of one.
inline json grid_values(const json& value) {
  return value.is_array() ? value : json::array({value});
}

// The JSON path of a grid parameter's i-th value: "/key/i" for a list, "/key" for one value.
inline std::string grid_path(const json& params, const std::string& key, std::size_t i) {
  return "/" + key + (params[key].is_array() ? "/" + std::to_string(i) : "");
}

}  // namespace sdpa
