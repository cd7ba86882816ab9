// The claims report: each textbook claim about scaled dot-product attention, the records of a
// `configs/seeds.json` result file that test it, and a verdict computed from those records
// (never typed in), citing the records it used.
#pragma once

#include <string>
#include <vector>

#include "sdpa/record.hpp"

namespace sdpa::claims {

enum class Verdict { holds, holds_with_qualification, does_not_hold };
std::string to_string(Verdict v);

struct Claim {
  Claim(int n, std::string s) : number(n), statement(std::move(s)) {}
  int number = 0;
  std::string statement;  // the claim as the usual explanations state it
  Verdict verdict = Verdict::does_not_hold;
  std::string reason;               // computed from the records: why this verdict
  std::vector<std::string> header;  // the evidence table
  std::vector<std::vector<std::string>> rows;
  std::string source;  // which experiment and cells the verdict was computed from
};

// Evaluates every claim on a result file of configs/seeds.json. Throws InputError naming
// the experiment when one the claims need is missing.
std::vector<Claim> evaluate(const json& result, const std::string& file);

std::string markdown(const std::vector<Claim>& claims, const std::string& file);

}  // namespace sdpa::claims
