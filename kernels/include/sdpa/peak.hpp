// The two ceilings of a roofline, as compute loops a caller times: independent fp32
// multiply-add chains (peak FLOP/s) and the STREAM triad (memory bandwidth), each compiled
// for every Highway target so any instruction set can be asked for by name. The loops have no
// clocks, threads or I/O; the caller decides how long and on how many threads. The triad's
// bandwidth is the denominator of memory-bound timings, so how both are measured is decided once,
// here (measure_multiply_add, measure_triad), for the roofline experiment and the kernel
// benchmarks alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sdpa::peak {

// The instruction sets the peaks are measured for, narrowest first: "scalar" (what the
// baseline build runs), "sse4", "sse4-int8" (SSSE3's int8 dot products beside SSE4, pmaddubsw and
// pmaddwd: the roof of flash-kv-int8@sse4), "avx2", "avx2-int8" (the same in ymm: the roof of
// flash-kv-int8@avx2), "avx-vnni" (AVX2 with AVX-VNNI: vpdpbusd in ymm),
// "avx512" (AVX-512F/BW/DQ/VL), "avx512-int8" (AVX512BW's vpmaddubsw and vpmaddwd in zmm: the
// roof of flash-kv-int8@avx512), "avx512-bf16" (AVX-512 with AVX512_BF16: the roof of bf16
// kernels, whose multiply-adds are vdpbf16ps), "avx512-vnni" (AVX-512 with AVX512_VNNI:
// vpdpbusd in zmm) on x86-64, "neon", "neon-dotprod" (NEON with the dot-product extension: sdot,
// the roof of flash-kv-int8@neon-dotprod), "sve-256" (SVE at 256 bits), "sve2-128" (SVE2 at 128
// bits) on aarch64; every build knows all.
const std::vector<std::string>& known_isas();
// Those of known_isas() this build compiled and this CPU runs.
std::vector<std::string> supported_isas();
bool isa_supported(std::string_view isa);
// Whether `isa` is the roof of bf16 or int8 dot products rather than of fp32 multiply-adds.
bool dot_product_isa(std::string_view isa);
// The ISA whose peak a kernel running on `kernel_isa` is read against: that ISA where this
// CPU runs its loops; for a library that picks its own ISA ("openblas", whose sgemm does fp32
// multiply-adds) the widest fp32 ISA here, never a dot-product roof; "" when no peak applies.
std::string roof_isa(std::string_view kernel_isa);

// Multiply-add lanes of one vector on `isa`: fp32 lanes (1 for scalar); on avx512-bf16 the 32
// bf16 products a vdpbf16ps adds, on the int8 roofs the int8 products of one step (neon-dotprod
// and sse4-int8: 16; avx2-int8, avx-vnni: 32; avx512-int8, avx512-vnni: 64). Precondition:
// isa_supported(isa).
int lanes(std::string_view isa);

// Independent multiply-add chains per vector lane: enough to cover latency x throughput of
// the FMA units (4 cycles x 2 pipes on current x86 cores) with room to spare.
inline constexpr int kChains = 12;

// Runs kChains independent chains acc = acc * a + b of `steps` steps each, in vectors of
// `isa`, and returns a value that depends on every chain (so nothing can be elided). On
// avx512-bf16 each step is one vdpbf16ps, on the int8 roofs one int8 dot product step
// (kv_int8.hpp's int8_dot_chains) (a and b are not used).
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

// The roof of a roofline at `intensity` FLOP per byte moved: the lower of the compute peak
// (GFLOP/s) and of what the triad bandwidth (GB/s) can feed. A shape is memory-bound when
// intensity x bandwidth is the lower one.
inline double roof_gflops(double peak_gflops, double triad_gbs, double intensity) {
  return std::min(peak_gflops, intensity * triad_gbs);
}

// The compute peak of a call whose scores' products run at one peak and whose values' run at
// another (Kernel::roofs): each product's time at its own peak, added. scores_share: the scores'
// part of the FLOPs, d_k / (d_k + d_v) by the count of 4 d per pair (docs/design.md).
inline double mixed_peak(double scores_gflops, double values_gflops, double scores_share) {
  return 1.0 / (scores_share / scores_gflops + (1.0 - scores_share) / values_gflops);
}

// Multiply-add GFLOP/s of multiply_add_chains on `threads` OpenMP threads, one sample per
// repetition of about min_time seconds (steps calibrated on one thread). Precondition:
// isa_supported(isa).
std::vector<double> measure_multiply_add(std::string_view isa, int threads, int repetitions,
                                         double min_time);

// Triad bandwidth in GB/s (triad_bytes per second), one sample per repetition: three arrays of
// footprint_bytes together, each of `threads` OpenMP
// threads on its own slice, first touched by that thread (its pages on its memory node); one
// warm-up pass, then each repetition times as many passes as fill min_time seconds. The
// bandwidth is the best sample: a ceiling is what the machine can do, and every disturbance
// only lowers a sample. Precondition: isa_supported(isa).
std::vector<double> measure_triad(std::string_view isa, int threads, double footprint_bytes,
                                  int repetitions, double min_time);

}  // namespace sdpa::peak
