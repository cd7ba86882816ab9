// The claims report: each textbook claim about scaled dot-product attention, the records of the
// result files that test it, and a verdict computed from those records (never typed in), citing
// the records it used. Every claim is one entry of a registry in analysis/claims.cpp (its
// number, its text, the config whose run it reads, what it needs, its evaluator); everything
// that lists claims or their inputs (the command line, the Makefile, the tests) reads it.
#pragma once

#include <string>
#include <vector>

#include "sdpa/record.hpp"

namespace sdpa::claims {

// not_tested: no cell of the given files could test the claim (the reason says what it needs).
enum class Verdict { holds, holds_with_qualification, does_not_hold, not_tested };
std::string to_string(Verdict v);

struct Claim {
  Claim(int n, std::string s) : number(n), statement(std::move(s)) {}
  int number = 0;
  std::string statement;  // the claim as the usual explanations state it
  Verdict verdict = Verdict::does_not_hold;
  std::string reason;               // computed from the records: why this verdict
  std::vector<std::string> header;  // the evidence table; no rows when not tested
  std::vector<std::vector<std::string>> rows;
  std::string source;  // which experiment and cells the verdict was computed from
};

// A result file the claims read, and its name for messages and citations.
struct Source {
  const json* result = nullptr;
  std::string file;
};

// A config whose run's result file some claims read, and which claims, in the order the
// registry lists them (the order `sdpa-bench claims` takes its files in `make report`).
struct Input {
  std::string config;  // e.g. "configs/seeds.json"
  std::vector<int> claims;
};
std::vector<Input> inputs();
// "configs/seeds.json (claims 1-6, 8, 9), configs/training.json (claim 10), ...".
std::string inputs_text();

// Evaluates every claim of the registry on the given result files, in claim order; a claim
// with no comparable cell in them is not tested. Each claim that cites experiments by name takes
// them from the first file holding them with records. Throws InputError naming the file when a
// file is given twice (the same contents), when no claim reads a file, and, with its JSON path,
// when a statistic a claim needs is not a number.
std::vector<Claim> evaluate(const std::vector<Source>& sources);
std::vector<Claim> evaluate(const json& result, const std::string& file);

std::string markdown(const std::vector<Claim>& claims, const std::vector<std::string>& files);

}  // namespace sdpa::claims
