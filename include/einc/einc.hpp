// einc: tensor index notation, compiled. The one header a user includes.
//
//   #include <einc/einc.hpp>
//   einc::Tensor y = einc::rearrange(x, "b c h w -> b h w c");   // a view: no byte moves
//   einc::Tensor s = einc::einsum("b i d, b j d -> b i j", q, k);  // one strided-batched GEMM
#pragma once

#include "compiler/plan.hpp"
#include "einc_build_info.hpp"
#include "grammar/diagnostic.hpp"
#include "runtime/api.hpp"
#include "runtime/calibration.hpp"
#include "runtime/dims.hpp"
#include "runtime/gradient.hpp"
#include "runtime/npy.hpp"
#include "runtime/plan_cache.hpp"
#include "runtime/program.hpp"
#include "runtime/tensor.hpp"
#include "runtime/threads.hpp"
#if EINC_HAS_DLPACK
#include "runtime/dlpack.hpp"
#endif
