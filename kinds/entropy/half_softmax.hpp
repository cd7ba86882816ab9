// The unstable softmax (no max subtraction) really computed in IEEE half precision, for the
// entropy experiment's measured fp16 overflow share beside the one it derives from the fp32
// lse. The rounding is sdpa::fp16_round, exact in software, so it is the same on every compiler
// and CPU: g++ 12 has no _Float16 in C++ on aarch64 and clang 14 none on x86. test_entropy
// checks it against the CPU's own conversion where the compiler has one (_Float16 with g++ on
// x86, __fp16 on aarch64).
#pragma once

#include <cmath>
#include <cstdint>

#include "sdpa/precision.hpp"  // fp16_round

namespace sdpa {

// Rows of Q (n_q x d_k) against K (n_kv x d_k), all keys visible, whose unstable softmax
// overflows in half precision: each score s = scale * q.k (an fp32 dot product, soft-capped when
// softcap > 0) held in fp16, with the sink (-inf: none) as one more term,
// each exp(s) held in fp16, and the row sum accumulated in fp32 (as PyTorch's half softmax
// does on CPU and GPU) and held in fp16; a row overflows when that sum is not finite.
// Accumulating in fp16 instead would stall at 2^11 for unit terms (the sum's spacing passes 2):
// a loss of accuracy, not an overflow.
std::int64_t fp16_overflowing_rows(const float* q, const float* k, std::int64_t n_q,
                                   std::int64_t n_kv, std::int64_t d_k, float scale,
                                   float softcap = 0, float sink = -INFINITY);

}  // namespace sdpa
