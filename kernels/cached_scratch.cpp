#include "cached_scratch.hpp"

#include <algorithm>
#include <vector>

namespace sdpa::detail {
namespace {
// The calling thread's caches, so release_cached_workspaces can reach them.
thread_local std::vector<CachedScratch*> t_caches;
}  // namespace

float* kept_input(KeptInput which, std::int64_t n) {
  thread_local CachedScratch t_inputs[3];
  return t_inputs[static_cast<int>(which)].floats(n);
}

CachedScratch::CachedScratch() { t_caches.push_back(this); }

CachedScratch::~CachedScratch() { std::erase(t_caches, this); }

float* CachedScratch::floats(std::int64_t n) {
  if (n != size_) {
    release();  // free before allocating: never both at once
    data_ = aligned_floats(n);
    size_ = n;
  }
  return data_.get();
}

void CachedScratch::release() {
  data_.reset();
  size_ = 0;
}

}  // namespace sdpa::detail

void sdpa::release_cached_workspaces() {
  for (detail::CachedScratch* c : detail::t_caches) c->release();
}
