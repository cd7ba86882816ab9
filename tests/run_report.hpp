// What a test program reports when it ends, whatever cases a filter (-tc) ran, in whatever order.
//
// Checks this host cannot run, said out loud rather than passed: a test case that needs an
// instruction set the CPU lacks is skipped through doctest (its summary counts it as skipped,
// never as passed), a check inside a running case prints a line when it is left out, and every
// one is listed again when the program ends. tests/isa_summary.cpp prints the per-ISA summary.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

struct NotRunList {
  std::vector<std::string> items;
  ~NotRunList() {
    for (const auto& s : items) std::printf("NOT RUN on this host: %s\n", s.c_str());
  }
};

inline NotRunList& not_run_list() {
  static NotRunList list;
  return list;
}

// A check left out on this host, once per `what` (which names the check and what it needs).
inline void note_not_run(const std::string& what) {
  auto& items = not_run_list().items;
  if (std::find(items.begin(), items.end(), what) != items.end()) return;
  items.push_back(what);
  MESSAGE("NOT RUN on this host: ", what);
}

// A test case's decorator: skipped (and listed at the end) unless `available`; e.g.
//   TEST_CASE("..." * run_if(bf16_native_available(), "needs AVX512_BF16: ..."))
inline doctest::skip run_if(bool available, const std::string& what) {
  if (!available) not_run_list().items.push_back(what);
  return doctest::skip(!available);
}

// The worst error-to-bound ratio over the checks this run made, printed at the end (each check
// fails on its own above 1; a test case reading it would depend on which cases ran before it).
struct WorstRatio {
  const char* what;
  double worst = 0;
  long long checks = 0;
  void add(double ratio) {
    ++checks;
    if (!(ratio <= worst)) worst = ratio;
  }
  ~WorstRatio() {
    if (checks > 0) std::printf("worst %s over %lld checks: %g\n", what, checks, worst);
  }
};
