// The JSON type of the suite: nlohmann's ordered_json, so a config embedded in a result file
// keeps the user's key order and tables list fields in the order they were written.
#pragma once

#include <nlohmann/json.hpp>

namespace sdpa {
using json = nlohmann::ordered_json;
}  // namespace sdpa
