// The precision kind: its error split (rounding the inputs, the kernel's arithmetic), the
// first-order prediction, the direction of claim 14, reproducibility, and inputs a kernel's
// formats cannot hold or a precision this CPU cannot run, refused with the config path.
#include <doctest/doctest.h>

#include <cmath>

#include "experiment_runner.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/peak.hpp"
#include "sdpa/precision.hpp"

using sdpa::json;
using sdpa::testing::error_of;
using sdpa::testing::run_cell;

namespace {

json precision_cell(const std::string& fields, int threads = 2) {
  return run_cell("precision", fields, threads);
}

double value(const json& stat) { return stat["value"].get<double>(); }

// An "agrees" (the prediction inside the 95 % CI of the trials' mean) says something only if
// the interval is narrow: within 20 % of the value, as test_gradient.cpp requires.
void check_agrees(const json& stat) {
  CHECK(stat["agrees"] == true);
  const auto& ci = stat["ci95"];
  CHECK_MESSAGE(ci[1].get<double>() - ci[0].get<double>() < 0.2 * value(stat), "95 % CI [",
                ci[0].get<double>(), ", ", ci[1].get<double>(), "] of ", value(stat));
}

}  // namespace

TEST_CASE("precision: fp32 inputs cost nothing to store; the fp64 oracle is exact to fp32") {
  // "reference" computes in double and returns fp32: O and lse within one fp32 rounding
  // (relative u32 per value, so at most u32 in the norm and the max; lse within u32 |lse|,
  // |lse| < ln N + max s < 10 here).
  const json r = precision_cell(R"("kernel": "reference", "d_k": 16, "n_kv": 64, "n_q": 4,
                                   "trials": 3, "scale": "sqrt_dk")");
  CHECK(r["precision"] == "fp32");
  CHECK(value(r["error"]["inputs"]["o_rms"]) == 0.0);
  CHECK(value(r["error"]["inputs"]["lse_max"]) == 0.0);
  CHECK(value(r["error"]["total"]["o_max"]) <= 0x1p-24);
  CHECK(value(r["error"]["total"]["lse_max"]) <= 10 * 0x1p-24);
  CHECK(r["nonfinite_rows"] == 0.0);
}

TEST_CASE("precision: bf16's error is mostly its inputs', and the first-order prediction holds") {
  // Scaled, d_k = 64, N = 256: the scores are resolved by bf16 (u |s| ~ 0.01), so the
  // first-order model applies; its prediction must lie in the 95 % CI of 16 trials' mean (a
  // fixed seed: the outcome is deterministic, not a 5 % gamble per run), a CI 9 % of the mean
  // wide. The model is good to about 2 %: at 64 trials (a CI 4 % wide) the total's prediction
  // lies 2 % above the mean, just outside.
  const json r = precision_cell(R"("kernel": "flash-bf16", "d_k": 64, "n_kv": 256, "n_q": 8,
                                   "trials": 16, "scale": "sqrt_dk")");
  CHECK(r["precision"] == "bf16");
  const json& e = r["error"];
  check_agrees(e["total"]["o_rms"]);
  check_agrees(e["inputs"]["o_rms"]);
  // Both parts are of bf16's order (u = 2^-8), the inputs' the larger (Q, K and V rounded;
  // the kernel rounds only P).
  const double u = 0x1p-8;
  CHECK(value(e["inputs"]["o_rms"]) > value(e["kernel"]["o_rms"]));
  CHECK(value(e["kernel"]["o_rms"]) > 0.05 * u);
  CHECK(value(e["total"]["o_rms"]) < 2 * u);
}

TEST_CASE("precision: int8 K/V's error is its inputs', and the prediction holds") {
  // flash-kv-int8 rounds Q, K and V per row (the scale sigma = max|x| / 127 of each); its
  // arithmetic is fp32's with exact integer scores, far below the rounding's part. 64 trials:
  // the lse's CI is then 18 % of its mean wide, the outputs' 4 %.
  const json r = precision_cell(R"("kernel": "flash-kv-int8", "d_k": 64, "n_kv": 256, "n_q": 8,
                                   "trials": 64, "scale": "sqrt_dk")");
  CHECK(r["precision"] == "kv-int8");
  const json& e = r["error"];
  check_agrees(e["total"]["o_rms"]);
  check_agrees(e["inputs"]["o_rms"]);
  check_agrees(e["inputs"]["lse_rms"]);
  CHECK(value(e["kernel"]["o_rms"]) < 0.1 * value(e["inputs"]["o_rms"]));
}

TEST_CASE("precision: unscaled attention loses more in bf16 than scaled at d_k = 64") {
  // Unscaled scores are 8 times larger: their rounding moves the logits 8 times more (the lse
  // error shows it directly).
  const std::string fields = R"("kernel": "flash-bf16", "d_k": 64, "n_kv": 256, "n_q": 8,
                                  "trials": 6, "scale": )";
  const json none = precision_cell(fields + "\"none\""),
             scaled = precision_cell(fields + "\"sqrt_dk\"");
  CHECK(value(none["error"]["total"]["lse_rms"]) > 4 * value(scaled["error"]["total"]["lse_rms"]));
  CHECK(value(none["error"]["total"]["o_rms"]) > value(scaled["error"]["total"]["o_rms"]));
}

TEST_CASE("precision: the same statistics on one thread and on two") {
  const std::string fields = R"("kernel": "flash-bf16", "d_k": 8, "n_kv": 33, "n_q": 3,
                                  "trials": 3, "scale": "none")";
  CHECK(precision_cell(fields, 1).dump() == precision_cell(fields, 2).dump());
}

TEST_CASE("precision: inputs past a stored format's range are refused with the config path") {
  // Entries up to 10 sd = 3.4e38: inside fp32 (3.40e38) but past bf16's largest (3.39e38);
  // std_k small keeps the scores inside fp32.
  const std::string msg = error_of(
      R"({"name": "p", "kind": "precision", "kernel": ["flash", "flash-bf16"], "d_k": 4,
          "std_q": 3.4e37, "std_k": 1e-30, "scale": 1})");
  CHECK(msg.find("bad.json: /experiments/0/kernel/1: kernel \"flash-bf16\" stores Q in bf16") !=
        std::string::npos);
  CHECK(msg.find("round to infinity") != std::string::npos);
  // The fp32 kernel takes the same inputs.
  CHECK(error_of(R"({"name": "p", "kind": "precision", "kernel": "flash", "d_k": 4,
                     "std_q": 3.4e37, "std_k": 1e-30, "scale": 1})") == "(accepted)");
}

TEST_CASE(
    "precision: a kernel of an instruction set this CPU lacks is refused, naming its precision") {
  std::string other;
  for (const auto& isa : sdpa::peak::known_isas())
    if (!sdpa::peak::isa_supported(isa) && other.empty()) other = "flash-bf16@" + isa;
  REQUIRE(!other.empty());
  const std::string msg =
      error_of(R"({"name": "p", "kind": "precision", "kernel": ")" + other + R"(", "d_k": 4})");
  CHECK(msg.find("bad.json: /experiments/0/kernel: unknown kernel \"" + other +
                 "\" on this machine: precision bf16 on instruction set") != std::string::npos);
  CHECK(msg.find("\"flash-bf16\"") != std::string::npos);  // what runs here instead
}

TEST_CASE("stored formats round to nearest even within their range") {
  const auto* bf16 = sdpa::stored_formats("bf16");
  const auto* fp16 = sdpa::stored_formats("kv-fp16");
  REQUIRE(bf16);
  REQUIRE(fp16);
  // int8: a scale per row (token and head), each element within half its step; P stays fp32.
  const auto* int8 = sdpa::stored_formats("kv-int8");
  REQUIRE(int8);
  CHECK((int8->k.round == nullptr && int8->k.round_rows && int8->q.round_rows));
  CHECK(int8->p.unit_roundoff == 0x1p-24);
  const float row[3] = {-2.54f, 1.0f, 0.006f}, step = 2.54f / 127;
  float y[3];
  int8->v.round_rows(row, 1, 3, y);
  CHECK((y[1] == 50 * step && y[2] == 0.0f && std::abs(y[0] + 2.54f) <= step / 2));
  CHECK(fp16->q.unit_roundoff == 0x1p-24);  // Q stays fp32
  const auto round = fp16->k.round;
  CHECK(round(1.0f + 0x1p-11f) == 1.0f);                // a tie goes to even
  CHECK(round(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);  // and up to even
  CHECK(round(65519.0f) == 65504.0f);                   // below the midpoint to 65536
  CHECK(std::isinf(round(65520.0f)));                   // at it: infinity
  CHECK(round(0x1p-25f) == 0.0f);                       // half the least subnormal
  CHECK(round(3 * 0x1p-25f) == 0x1p-23f);               // subnormals kept, ties even
  CHECK(bf16->v.round(1.0f + 0x1p-8f) == 1.0f);
  CHECK(std::isinf(bf16->v.round(3.4e38f)));
}
