// Scale schemes of a config ("none", "sqrt_dk", "dk", "log_n" or a number), shared by the
// experiment kinds.
#pragma once

#include <cmath>
#include <string>

#include "sdpa/experiments.hpp"

namespace sdpa {

// The scale c for keys of dimension d_k and n_keys keys per query.
inline double scale_value(const json& scheme, double d_k, double n_keys) {
  if (scheme.is_number()) return scheme.get<double>();
  const std::string s = scheme;
  if (s == "none") return 1.0;
  if (s == "sqrt_dk") return 1.0 / std::sqrt(d_k);
  if (s == "dk") return 1.0 / d_k;
  return std::log(n_keys) / std::sqrt(d_k);  // "log_n": length-scaled softmax
}

inline std::string scale_label(const json& scheme) {
  return scheme.is_number() ? scheme.dump() : scheme.get<std::string>();
}

}  // namespace sdpa
