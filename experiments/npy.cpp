// .npy reading and writing. The header is a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }; a small parser reads exactly
// that grammar, and the data size the shape implies is checked against the file before any
// allocation, so a hostile header cannot make us allocate what the file does not hold.
#include "sdpa/npy.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "sdpa/experiments.hpp"
#include "sdpa/input_file.hpp"

namespace sdpa::npy {
namespace {

static_assert(std::endian::native == std::endian::little,
              "'<f4' data is copied as is: little-endian hosts only");

constexpr std::string_view kMagic = "\x93NUMPY";
// np.load refuses headers over 10 000 bytes unless told otherwise; ours are under 128.
constexpr std::size_t kMaxHeaderBytes = 10000;

struct Header {
  std::vector<std::int64_t> shape;
  std::size_t data_offset = 0;
  std::uint64_t data_bytes = 0;  // what the shape needs
};

// Up to 40 bytes, escaped where not printable; trailing spaces and newlines (a header's
// padding) left out.
std::string printable(std::string_view bytes) {
  while (!bytes.empty() && (bytes.back() == ' ' || bytes.back() == '\n')) bytes.remove_suffix(1);
  std::string out;
  for (unsigned char c : bytes.substr(0, 40)) {
    if (std::isprint(c)) {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out + (bytes.size() > 40 ? "..." : "");
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// The dict literal of a header, parsed by recursive descent; every failure names what was
// expected at which byte of the header.
class HeaderParser {
 public:
  HeaderParser(std::string path, std::string_view text) : path_(std::move(path)), text_(text) {}

  Header parse() {
    std::string descr;
    bool has_descr = false, has_order = false, has_shape = false, fortran = false;
    std::vector<std::int64_t> shape;
    expect('{');
    while (!peek('}')) {
      const std::string key = string();
      expect(':');
      if (key == "descr") {
        descr = string(), has_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean(), has_order = true;
      } else if (key == "shape") {
        shape = tuple(), has_shape = true;
      } else {
        fail("a key 'descr', 'fortran_order' or 'shape'", "'" + key + "'");
      }
      if (!peek(',')) break;
      expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size())
      fail("the end of the header", "'" + printable(text_.substr(pos_)) + "'");
    if (!has_descr || !has_order || !has_shape)
      throw InputError(path_ +
                       ": bad .npy header: expected the keys 'descr', 'fortran_order' "
                       "and 'shape', found '" +
                       printable(text_) + "'");
    if (descr != "<f4")
      throw InputError(path_ + ": dtype '" + descr +
                       "': expected '<f4' (little-endian float32); "
                       "save a.astype(np.float32)");
    if (fortran)
      throw InputError(path_ +
                       ": Fortran-order array: expected C order; save "
                       "np.ascontiguousarray(a)");
    if (shape.empty() || shape.size() > 4)
      throw InputError(path_ + ": shape " + shape_text(shape) + ": expected 1 to 4 dimensions");
    Header h;
    h.shape = shape;
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& expected, const std::string& found) const {
    throw InputError(path_ + ": bad .npy header at byte " + std::to_string(pos_) + ": expected " +
                     expected + ", found " + found);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  std::string here() const {
    return pos_ < text_.size() ? "'" + printable(text_.substr(pos_, 1)) + "'" : "the end";
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("'") + c + "'", here());
    ++pos_;
  }
  std::string string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail("a quoted string", here());
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail("a closing quote", "the end");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (text_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        return value;
      }
    fail("True or False", here());
  }
  std::int64_t integer() {
    skip_space();
    std::int64_t value = 0;
    const std::size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (value > (std::int64_t(1) << 53)) fail("a dimension below 2^53", "a longer number");
      value = value * 10 + (text_[pos_++] - '0');
    }
    if (pos_ == start) fail("a non-negative integer", here());
    return value;
  }
  std::vector<std::int64_t> tuple() {
    std::vector<std::int64_t> values;
    expect('(');
    while (!peek(')')) {
      values.push_back(integer());
      if (values.size() > 32) fail("at most 32 dimensions", "more");
      if (!peek(',')) break;
      expect(',');
    }
    expect(')');
    return values;
  }

  std::string path_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

// Reads the fixed prefix and the header; `bytes` may hold only the file's beginning, but
// `file_size` is the whole file's, against which the shape is checked.
Header parse_header(const std::string& path, std::string_view bytes, std::uint64_t file_size) {
  if (bytes.substr(0, kMagic.size()) != kMagic)
    throw InputError(path + ": not a .npy file: expected the magic \\x93NUMPY, found '" +
                     printable(bytes.substr(0, kMagic.size())) + "'");
  if (bytes.size() < 10) throw InputError(path + ": truncated .npy file: no header length");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    throw InputError(path + ": .npy format version " + std::to_string(major) + "." +
                     std::to_string(static_cast<unsigned char>(bytes[7])) +
                     ": expected 1.0, 2.0 or 3.0");
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes)
    throw InputError(path + ": truncated .npy file: no header length");
  std::size_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i)
    header_length |= std::size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  if (header_length > kMaxHeaderBytes)
    throw InputError(path + ": bad .npy header: " + std::to_string(header_length) +
                     " bytes long, expected at most " + std::to_string(kMaxHeaderBytes));
  const std::size_t start = 8 + length_bytes;
  if (bytes.size() < start + header_length)
    throw InputError(path + ": truncated .npy file: the header needs " +
                     std::to_string(header_length) + " bytes, the file has " +
                     std::to_string(bytes.size() - start) + " after the prefix");
  Header h = HeaderParser(path, bytes.substr(start, header_length)).parse();
  h.data_offset = start + header_length;

  // The data size the shape implies, refused as soon as it passes what the file holds (which
  // also keeps the product from overflowing).
  const std::uint64_t available = file_size - std::min<std::uint64_t>(file_size, h.data_offset);
  const bool empty = std::find(h.shape.begin(), h.shape.end(), 0) != h.shape.end();
  std::uint64_t elements = empty ? 0 : 1;
  bool too_large = false;
  for (const auto d : h.shape) {
    if (empty) break;
    if (elements > available / 4 / std::uint64_t(d)) {
      too_large = true;
      break;
    }
    elements *= std::uint64_t(d);
  }
  h.data_bytes = elements * 4;
  if (too_large || h.data_bytes > available) {
    double need = 4;
    for (const auto d : h.shape) need *= double(d);
    throw InputError(path + ": truncated .npy file: shape " + shape_text(h.shape) + " needs " +
                     (too_large ? human_bytes(need) : std::to_string(h.data_bytes) + " bytes") +
                     " of float32 data, the file has " + std::to_string(available) +
                     " bytes after its header");
  }
  if (h.data_bytes < available)
    throw InputError(path + ": .npy file longer than its shape: shape " + shape_text(h.shape) +
                     " needs " + std::to_string(h.data_bytes) + " bytes of data, the file has " +
                     std::to_string(available));
  return h;
}

Array allocate(const std::string& path, const Header& h) {
  const double available = available_memory_bytes();
  if (double(h.data_bytes) > 0.8 * available)
    throw InputError(path + ": shape " + shape_text(h.shape) + " needs " +
                     human_bytes(double(h.data_bytes)) + " of memory, the machine has " +
                     human_bytes(available) + " available");
  Array a;
  a.shape = h.shape;
  a.data.resize(h.data_bytes / 4);
  return a;
}

}  // namespace

Array parse(const std::string& path, std::string_view bytes) {
  const Header h = parse_header(path, bytes, bytes.size());
  Array a = allocate(path, h);
  if (h.data_bytes > 0) std::memcpy(a.data.data(), bytes.data() + h.data_offset, h.data_bytes);
  return a;
}

Array read(const std::string& path) {
  const InputFile file = InputFile::open(path, "array", "a .npy file");
  const Header h = parse_header(
      path, file.read(0, std::min<std::uint64_t>(file.size(), 12 + kMaxHeaderBytes)), file.size());
  Array a = allocate(path, h);
  if (file.read_into(h.data_offset, reinterpret_cast<char*>(a.data.data()), h.data_bytes) !=
      h.data_bytes)
    throw InputError(path + ": cannot read array: the file shrank while being read");
  return a;
}

std::string serialize(const Array& array) {
  if (array.shape.empty() || array.shape.size() > 4)
    throw std::invalid_argument("npy::serialize: shape " + shape_text(array.shape) +
                                ": expected 1 to 4 dimensions");
  std::uint64_t elements = 1;
  for (const auto d : array.shape) {
    if (d < 0) throw std::invalid_argument("npy::serialize: negative dimension");
    elements *= std::uint64_t(d);
  }
  if (elements != array.data.size())
    throw std::invalid_argument("npy::serialize: shape " + shape_text(array.shape) + " holds " +
                                std::to_string(elements) + " values, data has " +
                                std::to_string(array.data.size()));
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text(array.shape) + ", }";
  // Magic, version, length, header and its final newline fill a multiple of 64 bytes.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(array.data.data()), array.data.size() * 4);
  return out;
}

void write(const std::string& path, const Array& array) {
  write_file_atomically(path, serialize(array));
}

}  // namespace sdpa::npy
