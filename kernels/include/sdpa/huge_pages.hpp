// Memory for large tensors and streams: aligned to 2 MiB and, on Linux, advised to transparent
// huge pages (madvise, which THP's default "madvise" mode requires). On this project's machine
// (a virtual machine: nested paging makes every TLB miss a two-level walk) the STREAM triad over
// 4 KiB pages ran at about 21 GB/s and its best of 20 repetitions moved by 20 % from run to run;
// over huge pages, about 27.8 GB/s and within 1 %: page walks, not DRAM, bounded the stream. The
// triad measurement uses it, and so should every tensor timed against that bandwidth, so that a
// kernel meets the bandwidth of the same kind of memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdpa {

// Allocations of at least kHugePageBytes get huge pages; smaller ones are plain operator new.
inline constexpr std::size_t kHugePageBytes = std::size_t(2) << 20;
void* allocate_huge_pages(std::size_t bytes);
void free_huge_pages(void* p, std::size_t bytes);

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_huge_pages(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) { free_huge_pages(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

template <class T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace sdpa
