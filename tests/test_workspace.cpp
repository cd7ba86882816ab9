// Each registry entry's workspace formula (Kernel::workspace_bytes) against what its calls
// take. Two measurements: the growth of the peak resident set during one large forward (in a
// child process each, so every kernel starts from the same high-water mark; it sees Eigen's and
// OpenBLAS's memory too), and, to the byte, what a call allocates through operator new, which
// is replaced here to count the bytes in use.
#include <doctest/doctest.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "kernels_under_test.hpp"
#include "sdpa/kernels.hpp"

namespace {

std::atomic<std::int64_t> g_in_use{0}, g_peak{0}, g_blocks{0};

void* counted(void* p) {
  if (!p) throw std::bad_alloc();
  const std::int64_t now = g_in_use += std::int64_t(malloc_usable_size(p));
  ++g_blocks;
  for (std::int64_t peak = g_peak; now > peak && !g_peak.compare_exchange_weak(peak, now);) {
  }
  return p;
}

void uncounted(void* p) {
  if (p) g_in_use -= std::int64_t(malloc_usable_size(p));
  std::free(p);
}

struct Allocated {
  double bytes = 0;
  std::int64_t blocks = 0;
};

// What `call` allocated at its peak, beyond what was in use before it: a first call, with no
// workspace kept from an earlier one (cached_scratch.hpp: another kernel's call of this shape
// leaves inputs and partials that this one would reuse).
template <class Call>
Allocated allocated_by(Call call) {
  sdpa::release_cached_workspaces();
  const std::int64_t before = g_in_use, blocks = g_blocks;
  g_peak = before;
  call();
  return {double(g_peak - before), g_blocks - blocks};
}

}  // namespace

void* operator new(std::size_t n) { return counted(std::malloc(n)); }
void* operator new[](std::size_t n) { return counted(std::malloc(n)); }
void* operator new(std::size_t n, std::align_val_t a) {
  return counted(std::aligned_alloc(std::size_t(a),
                                    (n + std::size_t(a) - 1) / std::size_t(a) * std::size_t(a)));
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { uncounted(p); }
void operator delete[](void* p) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t) noexcept { uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::align_val_t) noexcept { uncounted(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { uncounted(p); }

namespace {

struct Tensors {
  std::vector<float> q, k, v, out, lse, d_out, d_q, d_k, d_v;
  explicit Tensors(const sdpa::Shape& s)
      : q(s.q_elements()),
        k(s.k_elements()),
        v(s.v_elements()),
        out(s.out_elements()),
        lse(s.rows()),
        d_out(s.out_elements()),
        d_q(s.q_elements()),
        d_k(s.k_elements()),
        d_v(s.v_elements()) {
    std::mt19937 rng(3);
    std::normal_distribution<float> n01;
    for (auto* x : {&q, &k, &v, &d_out})
      for (auto& e : *x) e = n01(rng);
  }
};

// The peak resident set's growth, in bytes, during one forward of `kern` on fresh tensors, in a
// child process. Runs before anything starts OpenMP's threads in this process (this test comes
// first in the file, and doctest runs a file's tests in order), since they do not survive fork.
double resident_growth_of_forward(const sdpa::Kernel& kern, const sdpa::Shape& shape) {
  int out[2];
  REQUIRE(pipe(out) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Tensors t(shape);  // written: their pages are resident before the measurement starts
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    kern.forward({.shape = shape,
                  .q = t.q.data(),
                  .k = t.k.data(),
                  .v = t.v.data(),
                  .out = t.out.data(),
                  .lse = kern.row_statistics ? t.lse.data() : nullptr,
                  .scale = 0.25f,
                  .threads = 2});
    getrusage(RUSAGE_SELF, &after);
    const double growth = 1024.0 * double(after.ru_maxrss - before.ru_maxrss);  // KiB
    [[maybe_unused]] const auto n = write(out[1], &growth, sizeof growth);
    _exit(0);
  }
  close(out[1]);
  double growth = -1;
  const auto n = read(out[0], &growth, sizeof growth);
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(n == sizeof growth);
  REQUIRE(WIFEXITED(status));
  return growth;
}

}  // namespace

TEST_CASE("the memory a large forward takes is its kernel's formula, n_q x n_kv scores included") {
  // n_q = n_kv = 4000: a materialised score matrix is 64 MB, far above what no formula counts
  // (thread stacks, OpenMP's state, Eigen's and OpenBLAS's cache-sized packing buffers), for
  // which 16 MiB are allowed. Estimating Eigen or OpenBLAS with flash's formula fails here.
  const sdpa::Shape shape{.n_q = 4000, .n_kv = 4000, .d_k = 16, .d_v = 16};
  constexpr double kUncounted = 16 << 20;
  for (const sdpa::Kernel& kern : kernels_under_test()) {
    if (!kern.refusal(shape, {}, {}).empty()) continue;  // a block format's row length
    const double formula = kern.workspace_bytes(shape, sdpa::Pass::forward, 2);
    const double growth = resident_growth_of_forward(kern, shape);
    CAPTURE(kern.name);
    CAPTURE(formula);
    CAPTURE(growth);
    CHECK(growth <= formula + kUncounted);
    if (formula > 4 * kUncounted) CHECK(growth >= 0.5 * formula);  // nor far above it
  }
}

TEST_CASE("every kernel's workspace formula covers what its calls allocate, and not much more") {
  // d_k and d_v past one vector and not whole vectors; several query blocks and key tiles.
  const sdpa::Shape shape{.batch_heads = 2, .n_q = 100, .n_kv = 150, .d_k = 40, .d_v = 24};
  Tensors t(shape);
  for (const sdpa::Kernel& kern : kernels_under_test()) {
    REQUIRE_MESSAGE(bool(kern.workspace), kern.name);
    if (!kern.refusal(shape, {}, {}).empty()) continue;  // a block format's row length
    for (int threads : {1, 3}) {
      const sdpa::ForwardArgs fwd{.shape = shape,
                                  .q = t.q.data(),
                                  .k = t.k.data(),
                                  .v = t.v.data(),
                                  .out = t.out.data(),
                                  .lse = kern.row_statistics ? t.lse.data() : nullptr,
                                  .scale = 0.2f,
                                  .mask = {.causal = true},
                                  .threads = threads};
      const auto check = [&](sdpa::Pass pass, const Allocated& a) {
        const double formula = kern.workspace_bytes(shape, pass, threads);
        CAPTURE(kern.name);
        CAPTURE(threads);
        CAPTURE(std::string(pass == sdpa::Pass::forward ? "forward" : "backward"));
        CAPTURE(a.bytes);
        CAPTURE(formula);
        // malloc_usable_size is a block's request rounded up: by under 32 bytes, and under 64
        // more for a 64-byte-aligned one (glibc's aligned_alloc).
        CHECK(a.bytes <= formula + 96.0 * double(a.blocks));
        // Not a loose bound: on one thread (where OpenMP starts no other), what is counted at
        // all is at least half of the formula.
        if (threads == 1 && a.bytes > 0) CHECK(a.bytes >= 0.5 * formula);
      };
      check(sdpa::Pass::forward, allocated_by([&] { kern.forward(fwd); }));
      if (!kern.backward) continue;
      const sdpa::BackwardArgs bwd =
          sdpa::backward_of(fwd, t.d_out.data(), t.d_q.data(), t.d_k.data(), t.d_v.data());
      check(sdpa::Pass::backward, allocated_by([&] { kern.backward(bwd); }));
    }
  }
}
