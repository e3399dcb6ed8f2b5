// NumPy .npy files (NEP 1, numpy.lib.format): reading any file numpy writes for einc's dtypes, and
// writing files numpy reads. Every malformed input is an einc::Error of ErrorKind::file that names the
// file and what is wrong; sizes are checked against the file before anything is allocated.
//
// Format: "\x93NUMPY", version major.minor (1.0: 2-byte little-endian header length; 2.0 and 3.0:
// 4-byte; 3.0's header is UTF-8), then a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ended by '\n', then the data.
//
// Conventions einc follows:
// - dtypes: '<f8' '<f4' '<f2' '|i1' '<i4' '<i8' '|b1', with '>' (big-endian, byte-swapped on reading),
//   '=' and '|' (native) byte orders. Other dtypes (unsigned, complex, strings, structured) are
//   rejected by name; object arrays ('|O') are always rejected: einc never reads pickles.
// - bf16 is stored as numpy stores ml_dtypes' bfloat16: a 2-byte void field, '<V2' (or '|V2'). Reading,
//   any 2-byte void field is taken to be bf16.
// - fp8 is stored as a 1-byte void field, '|V1', as numpy stores ml_dtypes' float8 types. Reading, '|V1'
//   is taken to be f8e4m3: the file cannot say which fp8 format it holds, so an e5m2 tensor written by
//   einc reads back as f8e4m3 with the same bytes (reinterpret it if you know better).
// - The header must have exactly the keys 'descr', 'fortran_order' and 'shape', as numpy's reader
//   requires; an unknown or repeated key is an error. Keys may come in any order, quoted with ' or ",
//   with any whitespace and an optional trailing comma; shape entries may carry Python 2's 'L' suffix.
// - At most 64 dimensions (numpy's limit).
// - Data may start at any offset (numpy aligns it to 64 bytes, older versions to 16). Bytes after the
//   data are ignored, as numpy ignores them.
// - bool bytes other than 0 and 1 read as 1 (numpy treats any nonzero byte as True).
// - Fortran-order files are transposed into row-major tensors. Writing is always C order, native
//   (little-endian on every platform einc targets), version 1.0 unless the header needs 2.0, with the
//   data aligned to 64 bytes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "tensor.hpp"

namespace einc {

// A row-major CPU tensor with the file's dtype and shape.
Tensor read_npy(const std::filesystem::path& path);
// The same from bytes in memory; `name` stands for the file in messages.
Tensor read_npy_bytes(std::span<const std::byte> bytes, std::string_view name);

// Writes any CPU TensorView (any strides, including 0 and negative) as a C-order .npy file.
void write_npy(const std::filesystem::path& path, const TensorView& tensor);
std::vector<std::byte> npy_bytes(const TensorView& tensor);

}  // namespace einc
