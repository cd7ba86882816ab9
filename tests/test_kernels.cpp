// Every kernel variant against the fp64 reference on shapes that break lazy code.
#include <doctest/doctest.h>

#include "sdpa/kernels.hpp"

TEST_CASE("the registry lists the reference first") {
  REQUIRE(!sdpa::kernel_registry().empty());
  CHECK(sdpa::kernel_registry().front().name == "reference");
}
