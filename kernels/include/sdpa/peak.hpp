// The two ceilings of a roofline, as compute loops a caller times: independent fp32
// multiply-add chains (peak FLOP/s) and the STREAM triad (memory bandwidth), each compiled
// for every Highway target so any instruction set can be asked for by name. Compute only: no
// clocks, no threads, no I/O; the caller decides how long and on how many threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sdpa::peak {

// The instruction sets the peaks are measured for, narrowest first: "scalar" (what the
// baseline build runs), "sse4", "avx2", "avx512" (AVX-512F/BW/DQ/VL) on x86-64, "neon",
// "sve-256" (SVE at 256 bits), "sve2-128" (SVE2 at 128 bits) on aarch64; every build knows all.
const std::vector<std::string>& known_isas();
// Those of known_isas() this build compiled and this CPU runs.
std::vector<std::string> supported_isas();
bool isa_supported(std::string_view isa);

// fp32 lanes of one vector on `isa` (1 for scalar). Precondition: isa_supported(isa).
int lanes(std::string_view isa);

// Independent multiply-add chains per vector lane: enough to cover latency x throughput of
// the FMA units (4 cycles x 2 pipes on current x86 cores) with room to spare.
inline constexpr int kChains = 12;

// Runs kChains independent chains acc = acc * a + b of `steps` steps each, in vectors of
// `isa`, and returns a value that depends on every chain (so nothing can be elided).
// ISAs without a fused multiply-add (scalar, sse4 on the baseline build) issue a multiply
// and an add; both count as 2 FLOPs per lane per step. Precondition: isa_supported(isa).
float multiply_add_chains(std::string_view isa, std::int64_t steps, float a, float b);
// FLOPs of one multiply_add_chains call.
double multiply_add_flops(std::string_view isa, std::int64_t steps);

// STREAM triad x[i] = y[i] + s * z[i] for i < n, in vectors of `isa`.
// Precondition: isa_supported(isa).
void triad(std::string_view isa, float* x, const float* y, const float* z, float s, std::int64_t n);
// Bytes one triad over n elements moves by STREAM's count: read y and z, write x (the
// write-allocate read of x is not counted, as in STREAM).
inline double triad_bytes(std::int64_t n) { return 3.0 * sizeof(float) * double(n); }

}  // namespace sdpa::peak
