// Shape: the extents (or the strides) of a tensor's dims. Inline up to rank 8, so that copying a
// TensorView - which the hot path does - allocates nothing.
#pragma once

#include <cstdint>

#include "small_vector.hpp"

namespace einc {

using Shape = SmallVector<std::int64_t, 8>;

}  // namespace einc
