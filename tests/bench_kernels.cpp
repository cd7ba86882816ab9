#include <benchmark/benchmark.h>

#include "sdpa/kernels.hpp"

BENCHMARK_MAIN();
