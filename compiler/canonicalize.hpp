// Pass 2: canonicalize the loop nest of a Copy, Reduce or Contract step - one index space walked by
// several accesses - so that executors and generated kernels see the fewest, largest modes:
// extent-1 modes dropped, modes adjacent in every access merged, modes ordered outermost first.
#pragma once

#include <span>

#include "compiler/layout.hpp"

namespace einc {

// accesses[0] is the destination; a destination stride of 0 marks a reduced mode.
// @pre all layouts have the same extents
// @post the same tuples (accesses[0](i), accesses[1](i), ...) are visited, each as often;
//       no mode has extent 1 (a nest of size 1 has no modes); a nest of size 0 ends in one mode of
//       extent 0 - with destination stride 0 when the destination is not empty (an empty reduction
//       still writes its identity to every element), else it is that one mode, (0):(1) for the destination;
//       no two adjacent modes are mergeable in every access;
//       modes are ordered by the destination's |stride|, then the first source's |stride|, largest first
void canonicalize(std::span<Layout> accesses);

}  // namespace einc
