// `sdpa-bench attend` on .npy files: outputs and gradients match the fp64 reference, and
// arrays that do not fit together are refused by file name.
#include <doctest/doctest.h>

#include <cmath>

#include "cli_runner.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/npy.hpp"
#include "sdpa/rng.hpp"

using sdpa::testing::run_cli;
using sdpa::testing::TempDir;

namespace {

sdpa::npy::Array normals(std::vector<std::int64_t> shape, std::uint32_t stream) {
  sdpa::npy::Array a{shape, {}};
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  a.data.resize(n);
  sdpa::PhiloxStream rng({.seed = 3, .cell = stream});
  sdpa::fill_normal<float>(rng, a.data);
  return a;
}

double max_error(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0;
  for (std::size_t i = 0; i < got.size(); ++i) e = std::max(e, std::abs(got[i] - want[i]));
  return e;
}

}  // namespace

TEST_CASE("attend: O, dQ, dK, dV of a (b, n, d) problem match the fp64 reference") {
  TempDir dir;
  const auto q = normals({2, 5, 8}, 1), k = normals({2, 7, 8}, 2), v = normals({2, 7, 3}, 3),
             d_out = normals({2, 5, 3}, 4);
  for (auto [name, a] : {std::pair{"q.npy", &q}, {"k.npy", &k}, {"v.npy", &v}, {"do.npy", &d_out}})
    sdpa::npy::write((dir / name).string(), *a);
  const auto r =
      run_cli("attend --q " + (dir / "q.npy").string() + " --k " + (dir / "k.npy").string() +
                  " --v " + (dir / "v.npy").string() + " --grad-out " + (dir / "do.npy").string() +
                  " --causal --scale 0.5 --kernel flash --out " + (dir / "out").string(),
              dir);
  REQUIRE(r.exit_code == 0);
  const sdpa::Shape s{2, 5, 7, 8, 3};
  const std::vector<double> q64(q.data.begin(), q.data.end()), k64(k.data.begin(), k.data.end()),
      v64(v.data.begin(), v.data.end()), do64(d_out.data.begin(), d_out.data.end());
  const auto ref = sdpa::reference_attention(s, q64, k64, v64, 0.5, true);
  const auto grads = sdpa::reference_attention_backward(s, q64, k64, v64, do64, 0.5, true);
  const auto o = sdpa::npy::read((dir / "out" / "o.npy").string());
  CHECK(o.shape == std::vector<std::int64_t>{2, 5, 3});
  // fp32 kernels on O(1) values over 7 keys: 1e-5 is ~100 fp32 ulps of headroom.
  CHECK(max_error(o.data, ref.out) < 1e-5);
  CHECK(max_error(sdpa::npy::read((dir / "out" / "dq.npy").string()).data, grads.d_q) < 1e-5);
  CHECK(max_error(sdpa::npy::read((dir / "out" / "dk.npy").string()).data, grads.d_k) < 1e-5);
  CHECK(max_error(sdpa::npy::read((dir / "out" / "dv.npy").string()).data, grads.d_v) < 1e-5);
  CHECK(sdpa::npy::read((dir / "out" / "lse.npy").string()).shape ==
        std::vector<std::int64_t>{2, 5});
}

TEST_CASE("attend: shapes that do not fit are refused, naming the file") {
  TempDir dir;
  sdpa::npy::write((dir / "q.npy").string(), normals({4, 8}, 1));
  sdpa::npy::write((dir / "k.npy").string(), normals({6, 7}, 2));
  sdpa::npy::write((dir / "v.npy").string(), normals({6, 3}, 3));
  const auto r =
      run_cli("attend --q " + (dir / "q.npy").string() + " --k " + (dir / "k.npy").string() +
                  " --v " + (dir / "v.npy").string() + " --out " + (dir / "o").string(),
              dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: " + (dir / "k.npy").string() +
                     ": expected K of shape (n_kv, 8), like Q's batch and d_k, found (6, 7)\n");
  CHECK_FALSE(std::filesystem::exists(dir / "o" / "o.npy"));
}

TEST_CASE("attend: an input a bf16 kernel would round to infinity is refused, naming the file") {
  // 3.4e38 is finite in fp32 but past bf16's largest value (3.39e38).
  TempDir dir;
  auto k = normals({6, 8}, 2);
  k.data[13] = 3.4e38f;
  sdpa::npy::write((dir / "q.npy").string(), normals({4, 8}, 1));
  sdpa::npy::write((dir / "k.npy").string(), k);
  sdpa::npy::write((dir / "v.npy").string(), normals({6, 3}, 3));
  const std::string args = "attend --q " + (dir / "q.npy").string() + " --k " +
                           (dir / "k.npy").string() + " --v " + (dir / "v.npy").string() +
                           " --out " + (dir / "o").string() + " --kernel ";
  const auto r = run_cli(args + "flash-bf16", dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: " + (dir / "k.npy").string() +
                     ": kernel \"flash-bf16\" stores K in bf16 (precision bf16), whose largest "
                     "value is 3.38953e+38; found 3.4e+38 at row 1, column 5, which would round "
                     "to infinity\n");
  CHECK_FALSE(std::filesystem::exists(dir / "o" / "o.npy"));
  // The fp32 kernel holds it.
  CHECK(run_cli(args + "flash", dir).exit_code == 0);
}
