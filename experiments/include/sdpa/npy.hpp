// NumPy's .npy arrays, as `sdpa-bench attend` exchanges Q, K, V and outputs with Python:
// float32 ('<f4'), C order, 1 to 4 dimensions. Reads format versions 1.0 to 3.0, writes 1.0
// (what np.save writes for such arrays), so np.load(path) reads our files unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sdpa::npy {

struct Array {
  std::vector<std::int64_t> shape;  // 1 to 4 dimensions
  std::vector<float> data;          // row-major (C order), the product of shape long
};

// Reads a .npy file. Throws InputError naming the file, what was expected and what was found
// for a file that is not .npy, a bad header, a dtype other than '<f4', Fortran order, a shape
// outside 1 to 4 dimensions, or data shorter or longer than the shape says. A shape larger
// than the file or the machine's available memory is refused before anything is allocated.
Array read(const std::string& path);

// The same on a file's bytes in memory; `path` only labels messages.
Array parse(const std::string& path, std::string_view bytes);

// A .npy file's bytes (version 1.0, header padded to a multiple of 64 bytes as np.save does).
// Throws std::invalid_argument for a shape outside 1 to 4 dimensions or not matching data.
std::string serialize(const Array& array);

// Writes serialize(array) through a temporary file and a rename.
void write(const std::string& path, const Array& array);

}  // namespace sdpa::npy
