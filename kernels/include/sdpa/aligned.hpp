// Tensor storage aligned to a cache line, as frameworks allocate tensors (PyTorch's CPU
// allocator aligns to 64 bytes). glibc's malloc returns a block above its mmap threshold (128 KiB
// by default) 16 bytes past a page boundary, so a std::vector<float> holding a large K or V has
// every 64-byte load straddle two cache lines, which measured much slower
// (docs/perf-log/2026-11-25-zen5-alignment-kept-inputs-splits.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace sdpa {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  explicit CacheLineAllocator(const CacheLineAllocator<U>& /*other*/) noexcept {}
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLine)));
  }
  void deallocate(T* p, std::size_t /*n*/) noexcept {
    ::operator delete(p, std::align_val_t(kCacheLine));
  }
  template <class U>
  bool operator==(const CacheLineAllocator<U>& /*other*/) const noexcept {
    return true;
  }
};

// A std::vector whose elements start on a cache line.
template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

// A cache-line-aligned array of floats, uninitialised, freed as it was allocated.
struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t(kCacheLine)); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedFree>;
inline AlignedFloats aligned_floats(std::int64_t n) {
  return AlignedFloats(
      new (std::align_val_t(kCacheLine)) float[std::size_t(std::max<std::int64_t>(n, 1))]);
}

}  // namespace sdpa
