// Internal to sdpa_analysis: CSV fields, quoted one way for the report and compare.
#pragma once

#include <string>

namespace sdpa::report {

// A CSV field, quoted as RFC 4180 says when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s);

}  // namespace sdpa::report
