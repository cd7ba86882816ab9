// Peak memory of the fused kernel at a length where scores would not fit: runs `flash` once at
// N = 65 536, d = 64 (one head, non-causal) and prints the process's peak resident set beside
// the bytes of its tensors, so the difference is the kernel's own scratch. A small driver, not
// a test:  /usr/bin/time -v build/kt/tests/flash_memory [N] [d] [threads]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "sdpa/kernels.hpp"

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 65536;
  const std::int64_t d = argc > 2 ? std::atoll(argv[2]) : 64;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  const sdpa::Shape s{.batch_heads = 1, .n_q = n, .n_kv = n, .d_k = d, .d_v = d};
  std::vector<float> q(s.q_elements()), k(s.k_elements()), v(s.v_elements()), out(s.out_elements()),
      lse(s.rows());
  std::mt19937 rng(1);
  std::normal_distribution<float> n01;
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = n01(rng);
  const auto t0 = std::chrono::steady_clock::now();
  sdpa::find_kernel("flash")->forward({.shape = s,
                                       .q = q.data(),
                                       .k = k.data(),
                                       .v = v.data(),
                                       .out = out.data(),
                                       .lse = lse.data(),
                                       .scale = 0.125f,
                                       .threads = threads});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double tensors = double(q.size() + k.size() + v.size() + out.size() + lse.size()) * 4;
  std::printf("flash N=%lld d=%lld threads=%d: %.2f s, %.1f GFLOP/s\n", (long long)n, (long long)d,
              threads, secs, sdpa::forward_flops(s, sdpa::Mask{.causal = false}) / secs * 1e-9);
  std::printf("peak RSS %.1f MiB; tensors %.1f MiB; an N x N fp32 score matrix would be %.1f MiB\n",
              double(ru.ru_maxrss) / 1024, tensors / (1 << 20), double(n) * n * 4 / (1 << 20));
}
