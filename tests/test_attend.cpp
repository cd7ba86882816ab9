// `sdpa-bench attend` on .npy files: outputs and gradients match the fp64 reference, and
// arrays that do not fit together are refused by file name.
#include <doctest/doctest.h>

#include <cmath>

#include "attention_catalogue.hpp"
#include "cli_runner.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/npy.hpp"
#include "sdpa/rng.hpp"

using catalogue::max_error;
using sdpa::testing::run_cli;
using sdpa::testing::TempDir;

namespace {

sdpa::npy::Array normals(const std::vector<std::int64_t>& shape, std::uint32_t stream) {
  sdpa::npy::Array a{shape, {}};
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  a.data.resize(n);
  sdpa::PhiloxStream rng({.seed = 3, .cell = stream});
  sdpa::fill_normal<float>(rng, a.data);
  return a;
}

std::vector<double> widened(const sdpa::npy::Array& a) { return {a.data.begin(), a.data.end()}; }

// Writes q.npy, k.npy, v.npy (and do.npy when given) into dir and runs attend on them.
sdpa::testing::CommandResult attend_on(const TempDir& dir, const sdpa::npy::Array& q,
                                       const sdpa::npy::Array& k, const sdpa::npy::Array& v,
                                       const sdpa::npy::Array* d_out, const std::string& options) {
  std::string args = "attend";
  for (auto [name, a] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"grad-out", d_out}}) {
    if (!a) continue;
    const std::string path = (dir / (std::string(name) + ".npy")).string();
    sdpa::npy::write(path, *a);
    args += " --" + std::string(name) + " " + path;
  }
  return run_cli(args + " " + options + " --out-dir " + (dir / "out").string(), dir);
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
                  " --causal --scale 0.5 --kernel flash --out-dir " + (dir / "out").string(),
              dir);
  REQUIRE(r.exit_code == 0);
  const sdpa::Shape s{2, 5, 7, 8, 3};
  const std::vector<double> q64(q.data.begin(), q.data.end()), k64(k.data.begin(), k.data.end()),
      v64(v.data.begin(), v.data.end()), do64(d_out.data.begin(), d_out.data.end());
  const auto ref = sdpa::reference_attention(s, q64, k64, v64, 0.5, sdpa::Mask{.causal = true});
  const auto grads =
      sdpa::reference_attention_backward(s, q64, k64, v64, do64, 0.5, sdpa::Mask{.causal = true});
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
                  " --v " + (dir / "v.npy").string() + " --out-dir " + (dir / "o").string(),
              dir);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "error: " + (dir / "k.npy").string() +
                     ": expected K of shape (n_kv, 8), like Q's batch and d_k, found (6, 7)\n");
  CHECK_FALSE(std::filesystem::exists(dir / "o" / "o.npy"));
}

TEST_CASE("attend: (batch, heads, n, d) with fewer K/V heads than query heads matches fp64") {
  // Grouped-query attention: 6 query heads share 2 K/V heads (groups of 3), 2 sequences,
  // causal with n_q < n_kv, d_k != d_v.
  TempDir dir;
  const auto q = normals({2, 6, 5, 8}, 1), k = normals({2, 2, 7, 8}, 2),
             v = normals({2, 2, 7, 3}, 3), d_out = normals({2, 6, 5, 3}, 4);
  const auto r = attend_on(dir, q, k, v, &d_out, "--causal --kernel flash -j 2");
  REQUIRE(r.exit_code == 0);
  const sdpa::Shape s{.batch_heads = 12, .n_q = 5, .n_kv = 7, .d_k = 8, .d_v = 3, .group = 3};
  const auto c = 1 / std::sqrt(8.0);
  const auto ref = sdpa::reference_attention(s, widened(q), widened(k), widened(v), c,
                                             sdpa::Mask{.causal = true});
  const auto grads = sdpa::reference_attention_backward(
      s, widened(q), widened(k), widened(v), widened(d_out), c, sdpa::Mask{.causal = true});
  auto read = [&](const char* name) { return sdpa::npy::read((dir / "out" / name).string()); };
  CHECK(read("o.npy").shape == std::vector<std::int64_t>{2, 6, 5, 3});
  CHECK(read("lse.npy").shape == std::vector<std::int64_t>{2, 6, 5});
  CHECK(read("dk.npy").shape == k.shape);
  CHECK(read("dv.npy").shape == v.shape);
  // fp32 kernels on O(1) values over at most 7 keys, dK and dV summed over 3 query heads:
  // 1e-5 is still ~100 fp32 ulps of headroom. The reference's grouping (query head h reads
  // K/V head h / 3) is what this checks the file layout against.
  CHECK(max_error(read("o.npy").data, ref.out) < 1e-5);
  CHECK(max_error(read("lse.npy").data, ref.lse) < 1e-5);
  CHECK(max_error(read("dq.npy").data, grads.d_q) < 1e-5);
  CHECK(max_error(read("dk.npy").data, grads.d_k) < 1e-5);
  CHECK(max_error(read("dv.npy").data, grads.d_v) < 1e-5);
}

TEST_CASE("attend: a window, a soft-cap, ALiBi and sinks as flags match fp64, dsinks too") {
  // 4 query heads sharing 2 K/V heads, a causal window of 3 keys before each query, soft-cap 2,
  // ALiBi's standard slopes and a sink per query head (one of them -inf: no sink).
  TempDir dir;
  const auto q = normals({1, 4, 6, 8}, 1), k = normals({1, 2, 9, 8}, 2),
             v = normals({1, 2, 9, 3}, 3), d_out = normals({1, 4, 6, 3}, 4);
  const sdpa::npy::Array sinks{{4}, {0.5f, -INFINITY, 2.0f, -1.0f}};
  sdpa::npy::write((dir / "sinks.npy").string(), sinks);
  const auto r = attend_on(dir, q, k, v, &d_out,
                           "--causal --window 3,0 --softcap 2 --alibi --sinks " +
                               (dir / "sinks.npy").string() + " --kernel flash -j 2");
  REQUIRE(r.exit_code == 0);
  const sdpa::Shape s{.batch_heads = 4, .n_q = 6, .n_kv = 9, .d_k = 8, .d_v = 3, .group = 2};
  const auto slopes = sdpa::alibi_slopes(4);
  const sdpa::Mask mask{.causal = true, .window_left = 3, .window_right = 0};
  const sdpa::ScoreMod mod{.softcap = 2, .alibi_slopes = slopes, .sinks = sinks.data};
  const auto c = 1 / std::sqrt(8.0);
  const auto ref = sdpa::reference_attention(s, widened(q), widened(k), widened(v), c, mask, mod);
  const auto grads = sdpa::reference_attention_backward(s, widened(q), widened(k), widened(v),
                                                        widened(d_out), c, mask, mod);
  auto read = [&](const char* name) { return sdpa::npy::read((dir / "out" / name).string()); };
  // fp32 kernels on O(1) values over at most 4 keys and a sink: 1e-5 is ~100 fp32 ulps.
  CHECK(max_error(read("o.npy").data, ref.out) < 1e-5);
  CHECK(max_error(read("lse.npy").data, ref.lse) < 1e-5);
  CHECK(max_error(read("dq.npy").data, grads.d_q) < 1e-5);
  CHECK(max_error(read("dk.npy").data, grads.d_k) < 1e-5);
  CHECK(max_error(read("dv.npy").data, grads.d_v) < 1e-5);
  CHECK(read("dsinks.npy").shape == std::vector<std::int64_t>{4});
  CHECK(max_error(read("dsinks.npy").data, grads.d_sinks) < 1e-5);
}

TEST_CASE("attend: masks and modifiers that cannot apply are refused by flag; nothing written") {
  TempDir dir;
  const auto q = normals({1, 2, 4, 8}, 1), k = normals({1, 2, 6, 8}, 2),
             v = normals({1, 2, 6, 3}, 3);
  sdpa::npy::write((dir / "three.npy").string(), sdpa::npy::Array{{3}, {0, 0, 0}});
  sdpa::npy::write((dir / "docs.npy").string(), sdpa::npy::Array{{2}, {0, 2.5f}});
  const std::pair<std::string, std::string> cases[] = {
      {"--window 2", "--window: expected L,R"},
      {"--window -2,0", "--window"},
      {"--softcap 0", "--softcap"},
      {"--softcap nan", "--softcap"},
      {"--sinks " + (dir / "three.npy").string(),
       "--sinks: " + (dir / "three.npy").string() + ": expected one sink logit per query head"},
      {"--documents " + (dir / "docs.npy").string(), "--documents: "},
      {"--chunk -1", "--chunk"},
  };
  for (const auto& [flags, message] : cases) {
    CAPTURE(flags);
    const auto r = attend_on(dir, q, k, v, nullptr, flags);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "out" / "o.npy"));
  }
}

TEST_CASE("attend: grouped shapes that do not fit are refused, naming the file") {
  TempDir dir;
  const std::string k_path = (dir / "k.npy").string(), v_path = (dir / "v.npy").string();
  struct Case {
    std::vector<std::int64_t> q, k, v;
    std::string error;
  };
  for (const auto& c : std::vector<Case>{
           {{1, 6, 4, 8},
            {1, 4, 5, 8},
            {1, 4, 5, 3},
            k_path + ": expected K/V heads that divide Q's 6 heads (each K/V head serves "
                     "heads_q / heads_kv query heads), found (1, 4, 5, 8)"},
           {{2, 6, 4, 8},
            {1, 2, 5, 8},
            {1, 2, 5, 3},
            k_path + ": expected K of shape (2, heads_kv, n_kv, 8), like Q's batch and d_k, "
                     "found (1, 2, 5, 8)"},
           {{2, 6, 4, 8},
            {2, 5, 8},
            {2, 5, 3},
            k_path + ": expected K of shape (2, heads_kv, n_kv, 8), like Q's batch and d_k, "
                     "found (2, 5, 8)"},
           {{2, 6, 4, 8},
            {2, 2, 5, 8},
            {2, 3, 5, 3},
            v_path + ": expected V of shape (2, 2, 5, d_v), like K's batch, heads and n_kv, "
                     "found (2, 3, 5, 3)"},
           {{2, 6, 4, 8},
            {2, 0, 5, 8},
            {2, 0, 5, 3},
            k_path + ": expected a shape without zero dimensions (attention needs a query, a "
                     "key and d >= 1), found (2, 0, 5, 8)"},
       }) {
    CAPTURE(c.error);
    const auto r = attend_on(dir, normals(c.q, 1), normals(c.k, 2), normals(c.v, 3), nullptr, "");
    CHECK(r.exit_code == 2);
    CHECK(r.err == "error: " + c.error + "\n");
    CHECK_FALSE(std::filesystem::exists(dir / "out" / "o.npy"));
  }
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
                           " --out-dir " + (dir / "o").string() + " --kernel ";
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
