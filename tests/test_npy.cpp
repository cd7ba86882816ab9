// .npy arrays: what np.save writes is read back exactly, what we write np.load reads, and
// every malformed file gets a message naming it, what was expected and what was found,
// before anything is allocated.
#include <doctest/doctest.h>

#include <filesystem>

#include "sdpa/experiments.hpp"
#include "sdpa/npy.hpp"
#include "test_files.hpp"

using sdpa::testing::TempDir;
namespace npy = sdpa::npy;

namespace {

// A .npy file's bytes with the given header dict (version 1.0, padded as np.save pads).
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  header.append(63 - (prefix + header.size()) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += '\0';
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  if (major != 1) out += std::string(2, '\0');
  return out + header + data;
}

std::string floats(std::initializer_list<float> values) {
  std::string s(values.size() * 4, '\0');
  std::memcpy(s.data(), std::data(values), s.size());
  return s;
}

std::string error_of(const std::string& bytes) {
  try {
    npy::parse("a.npy", bytes);
  } catch (const sdpa::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

const std::string kDict23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

}  // namespace

TEST_CASE("np.save's bytes for a 2 x 3 float32 array, both ways") {
  const std::string data = floats({0, 1, 2, 3, 4, 5});
  const std::string bytes = npy_file(kDict23, data);
  CHECK(bytes.size() == 128 + 24);  // np.save pads the header to 128 bytes here
  const auto a = npy::parse("a.npy", bytes);
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  CHECK(a.data == std::vector<float>{0, 1, 2, 3, 4, 5});
  CHECK(npy::serialize(a) == bytes);
}

TEST_CASE("1 to 4 dimensions and empty arrays round-trip through files") {
  TempDir dir;
  for (const auto& shape :
       {std::vector<std::int64_t>{5}, std::vector<std::int64_t>{2, 3},
        std::vector<std::int64_t>{2, 3, 4}, std::vector<std::int64_t>{2, 1, 3, 2},
        std::vector<std::int64_t>{0, 7}}) {
    npy::Array a;
    a.shape = shape;
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    for (std::int64_t i = 0; i < n; ++i) a.data.push_back(0.5f * float(i) - 3.25f);
    const std::string path = (dir / "a.npy").string();
    npy::write(path, a);
    const auto b = npy::read(path);
    CHECK(b.shape == a.shape);
    CHECK(b.data == a.data);
    CHECK(std::filesystem::file_size(path) % 64 == std::uint64_t(n * 4) % 64);
  }
}

TEST_CASE("version 2.0 and 3.0 headers and double-quoted keys are read") {
  const std::string dict = R"({"descr": "<f4", "fortran_order": False, "shape": (3,)})";
  for (int major : {2, 3}) {
    const auto a = npy::parse("a.npy", npy_file(dict, floats({1, 2, 3}), major));
    CHECK(a.shape == std::vector<std::int64_t>{3});
    CHECK(a.data == std::vector<float>{1, 2, 3});
  }
}

TEST_CASE("wrong dtype, Fortran order and dimensions") {
  CHECK(error_of(npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
                          std::string(16, '\0'))) ==
        "a.npy: dtype '<f8': expected '<f4' (little-endian float32); save a.astype(np.float32)");
  CHECK(error_of(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                          std::string(8, '\0'))) ==
        "a.npy: dtype '>f4': expected '<f4' (little-endian float32); save a.astype(np.float32)");
  CHECK(error_of(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                          std::string(24, '\0'))) ==
        "a.npy: Fortran-order array: expected C order; save np.ascontiguousarray(a)");
  CHECK(error_of(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "")) ==
        "a.npy: shape (): expected 1 to 4 dimensions");
  CHECK(error_of(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 2), }",
                          std::string(8, '\0'))) ==
        "a.npy: shape (1, 1, 1, 1, 2): expected 1 to 4 dimensions");
}

TEST_CASE("bad magic, versions and headers") {
  CHECK(error_of("") == "a.npy: not a .npy file: expected the magic \\x93NUMPY, found ''");
  CHECK(error_of("PK\x03\x04zip") ==
        "a.npy: not a .npy file: expected the magic \\x93NUMPY, found 'PK\\x03\\x04zi'");
  CHECK(error_of(std::string("\x93NUMPY\x01", 7)) ==
        "a.npy: truncated .npy file: no header length");
  CHECK(error_of(std::string("\x93NUMPY\x04\x00\x10\x00", 10)) ==
        "a.npy: .npy format version 4.0: expected 1.0, 2.0 or 3.0");
  CHECK(error_of(npy_file(kDict23, "").substr(0, 40)) ==
        "a.npy: truncated .npy file: the header needs 118 bytes, the file has 30 after the prefix");
  CHECK(error_of(std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12)) ==
        "a.npy: bad .npy header: 2147483647 bytes long, expected at most 10000");
  CHECK(error_of(npy_file("{'descr': '<f4', 'shape': (2, 3), }", "")) ==
        "a.npy: bad .npy header: expected the keys 'descr', 'fortran_order' and 'shape', found "
        "'{'descr': '<f4', 'shape': (2, 3), }'");
  CHECK(
      error_of(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", "")) ==
      "a.npy: bad .npy header at byte 62: expected a key 'descr', 'fortran_order' or 'shape', "
      "found 'x'");
  CHECK(error_of(npy_file("{'descr': '<f4', 'fortran_order': No, 'shape': (2, 3), }", "")) ==
        "a.npy: bad .npy header at byte 34: expected True or False, found 'N'");
  CHECK(error_of(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "")) ==
        "a.npy: bad .npy header at byte 54: expected a non-negative integer, found '-'");
  CHECK(error_of(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", "")) ==
        "a.npy: bad .npy header at byte 60: expected the end of the header, found 'x'");
  CHECK(error_of(npy_file("{'descr: '<f4'}", "")) ==
        "a.npy: bad .npy header at byte 10: expected ':', found '<'");
}

TEST_CASE("data shorter or longer than the shape") {
  CHECK(error_of(npy_file(kDict23, floats({1, 2, 3, 4, 5}))) ==
        "a.npy: truncated .npy file: shape (2, 3) needs 24 bytes of float32 data, the file has 20 "
        "bytes after its header");
  CHECK(error_of(npy_file(kDict23, floats({1, 2, 3, 4, 5, 6, 7}))) ==
        "a.npy: .npy file longer than its shape: shape (2, 3) needs 24 bytes of data, the file has "
        "28");
}

TEST_CASE("a header claiming a huge shape is refused before anything is allocated") {
  // 2^60 floats claimed by a file of 128 bytes: the product is checked against the file.
  CHECK(error_of(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, "
                          "1073741824), }",
                          "")) ==
        "a.npy: truncated .npy file: shape (1073741824, 1073741824) needs 4 EiB of float32 data, "
        "the file has 0 bytes after its header");
  // Dimensions that overflow 64 bits when multiplied.
  CHECK(error_of(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (9007199254740992, "
                          "9007199254740992, 9007199254740992), }",
                          ""))
            .find("a.npy: truncated .npy file: shape (9007199254740992, ") == 0);

  // A sparse file of 1 TiB whose header is honest: refused for memory, not read.
  TempDir dir;
  const auto path = dir / "huge.npy";
  std::ofstream(path) << npy_file(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, "
      "65536, 64), }",
      "");
  std::filesystem::resize_file(path, std::filesystem::file_size(path) + (std::uint64_t(1) << 40));
  const std::string message = [&] {
    try {
      npy::read(path.string());
    } catch (const sdpa::InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  }();
  CHECK(message.rfind(path.string() + ": shape (65536, 65536, 64) needs 1 TiB of memory, the "
                                      "machine has ",
                      0) == 0);
}

TEST_CASE("file errors") {
  CHECK_THROWS_WITH_AS(npy::read("no/such.npy"),
                       "no/such.npy: cannot open array: No such file or directory",
                       sdpa::InputError);
  CHECK_THROWS_WITH_AS(npy::read("configs"),
                       "configs: cannot read array: it is a directory, expected a .npy file",
                       sdpa::InputError);
  CHECK_THROWS_AS(npy::serialize({{2, 2}, {1, 2, 3}}), std::invalid_argument);
  CHECK_THROWS_AS(npy::serialize({{1, 1, 1, 1, 1}, {1}}), std::invalid_argument);
}
