// Workspace kept between calls, as a framework's caching allocator keeps its blocks: an
// attention call that allocates its workspace on every call times the allocator and the page
// faults of fresh memory, which no framework pays per call (the eigen peer's n_q x n_kv score
// matrix, allocated per call, doubled its time at N = 4096, d = 64). Internal to sdpa_kernels.
#pragma once

#include <cstdint>

#include "query_blocks.hpp"

namespace sdpa::detail {

// One buffer per use and calling thread (declare it thread_local). A call of the same size
// reuses it; a call of another size frees it first, so what stays allocated is what the last
// shape needed (the kernel's workspace-bytes function), not the largest shape seen.
// release_cached_workspaces() frees every one of the calling thread's.
class CachedScratch {
 public:
  CachedScratch();
  ~CachedScratch();
  CachedScratch(const CachedScratch&) = delete;
  CachedScratch& operator=(const CachedScratch&) = delete;

  float* floats(std::int64_t n);  // 64-byte aligned, contents unspecified
  void release();

 private:
  AlignedFloats data_;
  std::int64_t size_ = 0;
};

// The calling thread's kept copy of one input of a call, as a kernel that rounds or widens its
// inputs on entry holds them (flash-bf16; the prefill path of the K/V storage formats): a
// CachedScratch per input. Fresh per-call vectors of large inputs cost most of a call (the pages
// malloc returns to the system at every free fault in again, presumably:
// docs/perf-log/2026-11-25-zen5-alignment-kept-inputs-splits.md). A call uses them for its
// duration only.
enum class KeptInput { kQ, kK, kV };
float* kept_input(KeptInput which, std::int64_t n);  // 64-byte aligned, contents unspecified

// Rows of one product of a composed peer (eigen, blas): the query rows of every head of a
// group, stacked, since they share K and V (one GEMM per K/V head reads K and V once, as a
// framework's grouped-query path does). Q and O hold them consecutively.
inline std::int64_t peer_rows(const Shape& s) { return s.group * s.n_q; }

}  // namespace sdpa::detail
