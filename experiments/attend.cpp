#include "sdpa/attend.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "sdpa/experiments.hpp"
#include "sdpa/input_error.hpp"
#include "sdpa/input_file.hpp"
#include "sdpa/kernels.hpp"
#include "sdpa/npy.hpp"
#include "sdpa/precision.hpp"

namespace sdpa {
namespace {

// (n, d) is one batch*head; (b, n, d) is b of them; (batch, heads, n, d) is batch sequences of
// heads each, where Q may have more heads than K and V (grouped-query attention).
struct Operand {
  std::string path;
  npy::Array array;
  std::int64_t batch, heads, rows, cols;  // batch * heads leading matrices of rows x cols
  std::size_t rank() const { return array.shape.size(); }
};

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

Operand load(const std::string& path, const char* name) {
  Operand o{path, npy::read(path), 1, 1, 0, 0};
  const auto& sh = o.array.shape;
  if (sh.size() < 2)
    throw InputError(
        path + ": " + name +
        ": expected shape (n, d), (batch*heads, n, d) or (batch, heads, n, d), found " +
        shape_text(sh));
  if (sh.size() >= 3) o.batch = sh[0];
  if (sh.size() == 4) o.heads = sh[1];
  o.rows = sh[sh.size() - 2];
  o.cols = sh.back();
  return o;
}

void expect(bool ok, const Operand& o, const std::string& what) {
  if (!ok) throw InputError(o.path + ": expected " + what + ", found " + shape_text(o.array.shape));
}

// An output of `rows` x `cols` (no column dimension when cols is 0) per leading matrix of like.
npy::Array shaped_like(const Operand& like, std::int64_t rows, std::int64_t cols,
                       std::vector<float> data) {
  npy::Array a;
  a.shape.assign(like.array.shape.begin(), like.array.shape.end() - 2);
  a.shape.push_back(rows);
  if (cols > 0) a.shape.push_back(cols);
  a.data = std::move(data);
  return a;
}

// The leading dimensions of a shape text, "(" for none: "(2, " or "(2, 4, ".
std::string leading_text(const std::vector<std::int64_t>& lead) {
  std::string s = "(";
  for (auto d : lead) s += std::to_string(d) + ", ";
  return s;
}

// K and V fit Q: the same rank and batch, K's d_k is Q's, V's n_kv is K's, and in 4-D, K/V
// heads that divide Q's heads, so that query head h reads K/V head h / (heads_q / heads_kv)
// (Shape::group), as PyTorch's enable_gqa and Hugging Face's repeat_kv do.
void check_fit(const Operand& q, const Operand& k, const Operand& v) {
  const std::string batch = q.rank() >= 3 ? std::to_string(q.batch) + ", " : "";
  const std::string kv_lead = q.rank() == 4 ? "(" + batch + "heads_kv, " : "(" + batch;
  expect(k.rank() == q.rank() && k.batch == q.batch && k.cols == q.cols, k,
         "K of shape " + kv_lead + "n_kv, " + std::to_string(q.cols) + "), like Q's batch and d_k");
  expect(q.heads % k.heads == 0, k,
         "K/V heads that divide Q's " + std::to_string(q.heads) +
             " heads (each K/V head serves heads_q / heads_kv query heads)");
  const std::vector<std::int64_t> k_lead(k.array.shape.begin(), k.array.shape.end() - 2);
  expect(v.rank() == k.rank() && v.batch == k.batch && v.heads == k.heads && v.rows == k.rows, v,
         "V of shape " + leading_text(k_lead) + std::to_string(k.rows) + ", d_v), like K's " +
             (q.rank() == 4 ? "batch, heads" : "batch") + " and n_kv");
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// Where element i of an operand sits: "row r, column c", then " of batch b" (3-D) or
// " of batch b, head h" (4-D).
std::string place(const Operand& o, std::int64_t i) {
  const std::int64_t m = i / o.cols / o.rows;
  return "row " + std::to_string(i / o.cols % o.rows) + ", column " + std::to_string(i % o.cols) +
         (o.rank() == 3 ? " of batch " + std::to_string(m) : "") +
         (o.rank() == 4
              ? " of batch " + std::to_string(m / o.heads) + ", head " + std::to_string(m % o.heads)
              : "");
}

// NaN or inf in an input would be hidden, not shown: the kernels' max subtraction turns a
// row with NaN into lse = -inf and o = 0. So inputs must be finite; the first that is not is
// named by its index.
void expect_finite(const Operand& o) {
  const auto& d = o.array.data;
  const auto bad = std::find_if(d.begin(), d.end(), [](float x) { return !std::isfinite(x); });
  if (bad == d.end()) return;
  throw InputError(o.path + ": expected finite values, found " + number(*bad) + " at " +
                   place(o, bad - d.begin()));
}

// A kernel that stores an input narrow (sdpa/precision.hpp) rounds what its format cannot hold
// to infinity; such inputs are refused, the first named by its index.
void expect_in_format(const Operand& o, const char* name, const Kernel& kernel,
                      const NumberFormat& format) {
  const auto& d = o.array.data;
  const auto bad = std::find_if(d.begin(), d.end(),
                                [&](float x) { return std::abs(double(x)) > format.max_finite; });
  if (bad == d.end()) return;
  throw InputError(o.path + ": kernel \"" + kernel.name + "\" stores " + name + " in " +
                   format.name + " (precision " + kernel.precision + "), whose largest value is " +
                   number(format.max_finite) + "; found " + number(*bad) + " at " +
                   place(o, bad - d.begin()) + ", which would round to infinity");
}

double largest_magnitude(const Operand& o) {
  double m = 0;
  for (float x : o.array.data) m = std::max(m, std::abs(double(x)));
  return m;
}

bool all_finite(const std::vector<float>& x) {
  return std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
}

// A one-dimensional .npy of `n` values (n < 0: any length), named by its flag.
std::vector<float> vector_file(const std::string& path, const char* flag, const char* what,
                               std::int64_t n) {
  npy::Array a = npy::read(path);
  if (a.shape.size() != 1 || (n >= 0 && a.shape[0] != n))
    throw InputError(std::string(flag) + ": " + path + ": expected " + what + ", shape (" +
                     (n >= 0 ? std::to_string(n) : std::string("n")) + ",), found " +
                     shape_text(a.shape));
  return std::move(a.data);
}

// Document start offsets: whole numbers in float32 (exact up to 2^24 keys).
std::vector<std::int64_t> document_starts(const std::string& path, std::int64_t n_kv) {
  const std::vector<float> x =
      vector_file(path, "--documents", "the start offset of each document", -1);
  std::vector<std::int64_t> starts;
  for (const float v : x) {
    if (!(v >= 0 && v < float(n_kv) && v == std::floor(v)))
      throw InputError("--documents: " + path + ": expected whole numbers from 0 to " +
                       std::to_string(n_kv - 1) + " (key positions), found " + number(v));
    starts.push_back(std::int64_t(v));
  }
  return starts;
}

}  // namespace

std::vector<std::string> attend(const AttendOptions& o) {
  const Kernel* kernel = find_kernel(o.kernel);
  if (!kernel)
    throw InputError("--kernel: unknown kernel \"" + o.kernel + "\" (see `sdpa-bench list`)");
  if (!o.grad_out.empty() && !kernel->backward)
    throw InputError("--kernel: \"" + o.kernel + "\" has no backward, needed for --grad-out");
  if (!kernel->row_statistics)
    throw InputError("--kernel: \"" + o.kernel +
                     "\" returns the output only, without the lse that attend writes");
  // Every output is checked, and written, together: all or nothing.
  std::vector<std::string> names = {"o.npy", "lse.npy"};
  if (!o.grad_out.empty()) names.insert(names.end(), {"dq.npy", "dk.npy", "dv.npy"});
  if (!o.grad_out.empty() && !o.sinks.empty()) names.push_back("dsinks.npy");
  check_output_folder("--out-dir", o.out, names,
                      {{o.q, "--q"},
                       {o.k, "--k"},
                       {o.v, "--v"},
                       {o.grad_out, "--grad-out"},
                       {o.documents, "--documents"},
                       {o.sinks, "--sinks"}});

  const Operand q = load(o.q, "Q"), k = load(o.k, "K"), v = load(o.v, "V");
  for (const Operand* a : {&q, &k, &v})
    expect(a->batch > 0 && a->heads > 0 && a->rows > 0 && a->cols > 0, *a,
           "a shape without zero dimensions (attention needs a query, a key and d >= 1)");
  check_fit(q, k, v);
  std::optional<Operand> d_out;
  if (!o.grad_out.empty()) {
    d_out.emplace(load(o.grad_out, "dO"));
    const auto out_shape = shaped_like(q, q.rows, v.cols, {}).shape;
    expect(d_out->array.shape == out_shape, *d_out,
           "dO shaped like the output " + shape_text(out_shape));
  }
  for (const Operand* a : {&q, &k, &v}) expect_finite(*a);
  if (const StoredFormats* f = stored_formats(kernel->precision)) {
    expect_in_format(q, "Q", *kernel, f->q);
    expect_in_format(k, "K", *kernel, f->k);
    expect_in_format(v, "V", *kernel, f->v);
  }
  if (d_out) expect_finite(*d_out);
  const double scale = o.scale.value_or(1.0 / std::sqrt(double(q.cols)));
  if (std::abs(scale) > FLT_MAX || (scale != 0 && std::abs(scale) < FLT_MIN))
    throw InputError(
        "--scale: expected 0 or a magnitude in fp32's normal range [1.18e-38, "
        "3.4e+38] (the kernels compute in fp32), found " +
        number(scale));

  const Shape shape{q.batch * q.heads, q.rows, k.rows, q.cols, v.cols, q.heads / k.heads};

  // The mask and the score modifier of the flags (sdpa/mask.hpp).
  const std::vector<std::int64_t> documents =
      o.documents.empty() ? std::vector<std::int64_t>{} : document_starts(o.documents, k.rows);
  const std::vector<float> sinks =
      o.sinks.empty() ? std::vector<float>{}
                      : vector_file(o.sinks, "--sinks", "one sink logit per query head", q.heads);
  const std::vector<float> slopes = o.alibi ? alibi_slopes(q.heads) : std::vector<float>{};
  const Mask mask{.causal = o.causal,
                  .prefix = o.prefix,
                  .window_left = o.window ? o.window->first : -1,
                  .window_right = o.window ? o.window->second : -1,
                  .chunk = o.chunk,
                  .documents = documents};
  const ScoreMod mod{.softcap = float(o.softcap), .alibi_slopes = slopes, .sinks = sinks};
  if (const std::string why = mask_problem(shape, mask, mod); !why.empty())
    throw InputError("--window, --chunk, --prefix, --documents, --softcap, --alibi, --sinks: " +
                     why);
  // A row that sees no key has lse -inf unless its head has a sink to attend to. The causal
  // mask is aligned to the end of the keys, so with n_q > n_kv its first rows see none.
  if (sinks.empty()) {
    std::vector<std::int64_t> blind;
    for (std::int64_t i = 0; i < q.rows; ++i)
      if (mask.visible(shape, i).size() == 0) blind.push_back(i);
    if (!blind.empty())
      throw InputError("the mask (--causal, --window, --chunk, --prefix, --documents) leaves " +
                       std::to_string(blind.size()) + " of " + std::to_string(q.rows) +
                       " query rows of each head without a key (first row " +
                       std::to_string(blind.front()) + ", last " + std::to_string(blind.back()) +
                       "; n_q " + std::to_string(q.rows) + ", n_kv " + std::to_string(k.rows) +
                       "): their lse would be -inf; widen the mask or give --sinks");
  }
  if (const std::string why = kernel->refusal(shape, mask, mod); !why.empty())
    throw InputError("--kernel: \"" + o.kernel + "\" cannot run these shapes: " + why);
  std::vector<float> out(shape.out_elements()), lse(shape.rows());
  ForwardArgs fwd{.shape = shape,
                  .q = q.array.data.data(),
                  .k = k.array.data.data(),
                  .v = v.array.data.data(),
                  .out = out.data()};
  fwd.lse = lse.data();
  fwd.scale = float(scale);
  fwd.mask = mask;
  fwd.score_mod = mod;
  fwd.threads = o.threads;
  kernel->forward(fwd);
  std::vector<std::pair<std::string, npy::Array>> outputs = {
      {"o.npy", shaped_like(q, q.rows, v.cols, out)}, {"lse.npy", shaped_like(q, q.rows, 0, lse)}};

  if (d_out) {
    std::vector<float> dq(shape.q_elements()), dk(shape.k_elements()), dv(shape.v_elements());
    BackwardArgs bwd{.shape = shape,
                     .q = fwd.q,
                     .k = fwd.k,
                     .v = fwd.v,
                     .out = out.data(),
                     .lse = lse.data(),
                     .d_out = d_out->array.data.data(),
                     .d_q = dq.data(),
                     .d_k = dk.data(),
                     .d_v = dv.data()};
    bwd.scale = fwd.scale, bwd.mask = mask, bwd.score_mod = mod, bwd.threads = o.threads;
    std::vector<float> d_sinks(sinks.size());
    if (!sinks.empty()) bwd.d_sinks = d_sinks.data();
    kernel->backward(bwd);
    outputs.emplace_back("dq.npy", shaped_like(q, q.rows, q.cols, dq));
    outputs.emplace_back("dk.npy", shaped_like(k, k.rows, k.cols, dk));
    outputs.emplace_back("dv.npy", shaped_like(v, v.rows, v.cols, dv));
    if (!sinks.empty())
      outputs.emplace_back("dsinks.npy", npy::Array{{std::int64_t(sinks.size())}, d_sinks});
  }
  // Finite inputs can still overflow fp32 in q.k, c q.k, the sums or a gradient: refused
  // rather than written as inf and NaN, naming the magnitudes that did it.
  for (const auto& [name, array] : outputs)
    if (!all_finite(array.data)) {
      const double a = largest_magnitude(q), b = largest_magnitude(k);
      const double dot = a * b * double(q.cols);
      const std::string magnitudes = "largest |Q| " + number(a) + ", |K| " + number(b) + ", |V| " +
                                     number(largest_magnitude(v));
      throw InputError(
          dot > FLT_MAX
              ? "the inputs' magnitudes overflow fp32 before the scale applies: q.k reaches " +
                    number(dot) + " (" + magnitudes + ", d_k " + std::to_string(q.cols) +
                    "), above fp32's largest 3.4e+38; " + name +
                    " would hold non-finite values; reduce the inputs"
              : "scale " + number(scale) +
                    ": the inputs' magnitudes overflow fp32 in the kernel's scores, sums or "
                    "gradients (" +
                    magnitudes + ", |c q.k| up to " + number(std::abs(scale) * dot) + "): " + name +
                    " would hold non-finite values; reduce the inputs or the scale");
    }

  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<std::string> written;
  for (const auto& [name, array] : outputs) {
    written.push_back((fs::path(o.out) / name).string());
    files.emplace_back(written.back(), npy::serialize(array));
  }
  write_files_atomically(files);
  return written;
}

}  // namespace sdpa
