// The claims report: each textbook claim about scaled dot-product attention, the records of a
// `configs/seeds.json` (and `configs/training.json`) result file that test it, and a verdict
// computed from those records (never typed in), citing the records it used.
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

// A result file the claims read, and its name for messages and citations.
struct Source {
  const json* result = nullptr;
  std::string file;
};

// Evaluates every claim on the given result files: claims 1-9 on the experiments of
// configs/seeds.json, claim 10 on every `training` experiment (configs/training.json), claims
// 11-13 on every `stability` experiment (configs/stability.json), claim 14 on every `precision`
// experiment of a half-precision kernel (configs/precision.json); each of claims 1-9 takes its
// records from the first file holding the experiment it cites. Claim 10 is left out when no file
// has a training experiment, claims 11-13 when none has a stability experiment, claim 14 when
// none has a precision experiment. Throws InputError naming the experiment when one
// of claims 1-9 needs is missing.
std::vector<Claim> evaluate(const std::vector<Source>& sources);
std::vector<Claim> evaluate(const json& result, const std::string& file);

std::string markdown(const std::vector<Claim>& claims, const std::vector<std::string>& files);

}  // namespace sdpa::claims
