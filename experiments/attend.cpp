#include "sdpa/attend.hpp"

#include <cmath>
#include <filesystem>

#include "sdpa/input_error.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/npy.hpp"

namespace sdpa {
namespace {

// (n, d) is one batch*head; (b, n, d) is b of them.
struct Operand {
  std::string path;
  npy::Array array;
  std::int64_t batch, rows, cols;
};

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

Operand load(const std::string& path, const char* name) {
  Operand o{path, npy::read(path), 1, 0, 0};
  const auto& sh = o.array.shape;
  if (sh.size() != 2 && sh.size() != 3)
    throw InputError(path + ": " + name + ": expected shape (n, d) or (batch*heads, n, d), found " +
                     shape_text(sh));
  o.batch = sh.size() == 3 ? sh[0] : 1;
  o.rows = sh[sh.size() - 2];
  o.cols = sh.back();
  return o;
}

void expect(bool ok, const Operand& o, const std::string& what) {
  if (!ok) throw InputError(o.path + ": expected " + what + ", found " + shape_text(o.array.shape));
}

npy::Array shaped_like(const Operand& like, std::int64_t rows, std::int64_t cols,
                       std::vector<float> data) {
  npy::Array a;
  if (like.array.shape.size() == 3) a.shape.push_back(like.batch);
  a.shape.push_back(rows);
  if (cols > 0) a.shape.push_back(cols);
  a.data = std::move(data);
  return a;
}

}  // namespace

std::vector<std::string> attend(const AttendOptions& o) {
  const Kernel* kernel = find_kernel(o.kernel);
  if (!kernel)
    throw InputError("--kernel: unknown kernel \"" + o.kernel + "\" (see `sdpa-bench list`)");
  if (!o.grad_out.empty() && !kernel->backward)
    throw InputError("--kernel: \"" + o.kernel + "\" has no backward, needed for --grad-out");
  const Operand q = load(o.q, "Q"), k = load(o.k, "K"), v = load(o.v, "V");
  const std::string rank = q.array.shape.size() == 3 ? "(" + std::to_string(q.batch) + ", " : "(";
  expect(k.array.shape.size() == q.array.shape.size() && k.batch == q.batch && k.cols == q.cols, k,
         "K of shape " + rank + "n_kv, " + std::to_string(q.cols) + "), like Q's batch and d_k");
  expect(v.array.shape.size() == q.array.shape.size() && v.batch == q.batch && v.rows == k.rows, v,
         "V of shape " + rank + std::to_string(k.rows) + ", d_v), like K's batch and n_kv");

  const Shape shape{q.batch, q.rows, k.rows, q.cols, v.cols};
  std::vector<float> out(shape.out_elements()), lse(shape.rows());
  ForwardArgs fwd{.shape = shape,
                  .q = q.array.data.data(),
                  .k = k.array.data.data(),
                  .v = v.array.data.data(),
                  .out = out.data()};
  fwd.lse = lse.data();
  fwd.scale = float(o.scale.value_or(1.0 / std::sqrt(double(q.cols))));
  fwd.causal = o.causal;
  fwd.threads = o.threads;
  kernel->forward(fwd);

  namespace fs = std::filesystem;
  fs::create_directories(o.out);
  std::vector<std::string> written;
  auto save = [&](const char* name, const npy::Array& a) {
    written.push_back((fs::path(o.out) / name).string());
    npy::write(written.back(), a);
  };
  save("o.npy", shaped_like(q, q.rows, v.cols, out));
  save("lse.npy", shaped_like(q, q.rows, 0, lse));
  if (o.grad_out.empty()) return written;

  const Operand d_out = load(o.grad_out, "dO");
  expect(d_out.array.shape == shaped_like(q, q.rows, v.cols, {}).shape, d_out,
         "dO shaped like the output " + shape_text(shaped_like(q, q.rows, v.cols, {}).shape));
  std::vector<float> dq(shape.q_elements()), dk(shape.k_elements()), dv(shape.v_elements());
  BackwardArgs bwd{.shape = shape,
                   .q = fwd.q,
                   .k = fwd.k,
                   .v = fwd.v,
                   .out = out.data(),
                   .lse = lse.data(),
                   .d_out = d_out.array.data.data(),
                   .d_q = dq.data(),
                   .d_k = dk.data(),
                   .d_v = dv.data()};
  bwd.scale = fwd.scale, bwd.causal = o.causal, bwd.threads = o.threads;
  kernel->backward(bwd);
  save("dq.npy", shaped_like(q, q.rows, q.cols, dq));
  save("dk.npy", shaped_like(k, k.rows, k.cols, dk));
  save("dv.npy", shaped_like(v, v.rows, v.cols, dv));
  return written;
}

}  // namespace sdpa
