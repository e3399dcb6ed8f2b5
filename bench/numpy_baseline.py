#!/usr/bin/env python3
"""numpy's (and einops') times for the cases of cpu_bench, printed as `key seconds` lines.

cpu_bench runs this once and shows the numbers beside its own; it prints nothing if numpy is missing.
Sizes follow cpu_bench's (--quick: a quarter).
"""
import sys
import time

try:
    import numpy as np
except ImportError:
    sys.exit(0)

quick = "--quick" in sys.argv
scale = 4 if quick else 1
repeats = 3 if quick else 9


def median_time(work, calls=1):
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            work()
        times.append((time.perf_counter() - start) / calls)
    return sorted(times)[len(times) // 2]


def report(key, seconds):
    print(f"{key} {seconds:.9g}", flush=True)


rng = np.random.default_rng(0)
f32 = lambda *shape: rng.standard_normal(shape, dtype=np.float32)

half = 1 if scale == 1 else 2
x = f32(4096 // half, 4096 // half)
report("transpose_4096", median_time(lambda: np.ascontiguousarray(x.T)))
x = f32(16 // scale, 64, 128, 128)
report("nchw_to_nhwc", median_time(lambda: np.ascontiguousarray(x.transpose(0, 2, 3, 1))))
x = f32(8 // scale, 512, 16 * 128)
report("heads_split", median_time(lambda: np.ascontiguousarray(x.reshape(8 // scale, 512, 16, 128).transpose(0, 2, 1, 3))))
x = f32(8, 8, 16 // scale, 16, 8, 32)
report("perm6d", median_time(lambda: np.ascontiguousarray(x.transpose(5, 3, 1, 4, 2, 0))))
x = f32(8, 8, 16 // scale, 16, 8, 128)
report("perm6d_large", median_time(lambda: np.ascontiguousarray(x.transpose(5, 3, 1, 4, 2, 0))))
x = f32(7840000 // scale, 4)
report("transpose_inner4", median_time(lambda: np.ascontiguousarray(x.T)))
x = f32(64 // scale, 224, 224, 3)
report("nhwc_to_nchw_c3", median_time(lambda: np.ascontiguousarray(x.transpose(0, 3, 1, 2))))

x = f32(4096 // scale, 4096)
report("sum_inner_4096", median_time(lambda: x.sum(axis=1)))
report("sum_outer_4096", median_time(lambda: x.sum(axis=0)))
report("sum_all_4096", median_time(lambda: x.sum()))
x = f32(32768 * 16 // scale, 32)
report("sum_inner_32768x32", median_time(lambda: x.sum(axis=1)))
report("sum_outer_32768x32", median_time(lambda: x.sum(axis=0)))
x = f32(7840000 // scale, 4)
report("sum_inner_7840000x4", median_time(lambda: x.sum(axis=1)))
report("sum_outer_7840000x4", median_time(lambda: x.sum(axis=0)))
x = f32(64 // scale, 512, 512)
report("max_mid", median_time(lambda: x.max(axis=1)))
x = f32(16 // scale, 64, 128, 128)
report("mean_pool", median_time(lambda: x.reshape(16 // scale, 64, 64, 2, 64, 2).mean(axis=(3, 5))))

big = 1024 if quick else 2048
a, b = f32(big, big), f32(big, big)
report("matmul", median_time(lambda: np.einsum("ik,kj->ij", a, b, optimize=True)))
q, k = f32(32, 512, 64), f32(32, 512, 64)
report("attention_scores", median_time(lambda: np.einsum("bid,bjd->bij", q, k, optimize=True)))
a, w = f32(8, 512, 1024), f32(1024, 1024)
report("linear", median_time(lambda: np.einsum("bsd,de->bse", a, w, optimize=True)))

# the call classes numpy is the obvious line for (cpu_bench's "vs numpy" group)
a, b = f32(2048 // scale, 2048), f32(2048 // scale, 2048)
report("elementwise_product", median_time(lambda: np.einsum("ij,ij->ij", a, b, optimize=True)))
x, w = f32(8 // scale, 512, 1024), f32(1024)
report("scale_rows", median_time(lambda: np.einsum("bse,e->bse", x, w, optimize=True)))
u, v = f32(4194304 // scale), f32(4194304 // scale)
report("dot", median_time(lambda: np.einsum("i,i->", u, v, optimize=True)))
m, v = f32(4096 // scale, 4096), f32(4096)
report("matvec", median_time(lambda: np.einsum("ij,j->i", m, v, optimize=True)))
a, b = f32(64 // scale, 256, 256), f32(64 // scale, 256, 256)
report("row_dot", median_time(lambda: np.einsum("bij,bij->b", a, b, optimize=True)))
x = f32(16777216 // scale)
report("max_all", median_time(lambda: x.max()))
x = f32(16384 // scale, 1024)
report("max_rows", median_time(lambda: x.max(axis=1)))
q, k = f32(8 // scale, 197, 12, 64), f32(8 // scale, 197, 12, 64)
report("attention_natural", median_time(lambda: np.einsum("bihd,bjhd->bhij", q, k, optimize=True)))
x = f32(256 // scale, 256, 256)
report("perm3d", median_time(lambda: np.ascontiguousarray(x.transpose(2, 1, 0))))
x = f32(16 // scale, 16, 32, 32, 32)
report("perm5d", median_time(lambda: np.ascontiguousarray(x.transpose(4, 2, 0, 3, 1))))

# gradients, written the obvious numpy way (cpu_bench's "backward" group): every input's gradient
x, w, g = f32(8 // scale, 512, 1024), f32(1024, 1024), f32(8 // scale, 512, 1024)
report("backward_linear", median_time(lambda: (np.einsum("bse,de->bsd", g, w, optimize=True),
                                               np.einsum("bsd,bse->de", x, g, optimize=True))))
q, k, g = f32(8 // scale, 197, 12, 64), f32(8 // scale, 197, 12, 64), f32(8 // scale, 12, 197, 197)
report("backward_attention_natural", median_time(lambda: (np.einsum("bhij,bjhd->bihd", g, k, optimize=True),
                                                          np.einsum("bhij,bihd->bjhd", g, q, optimize=True))))
x, g = f32(16384 // scale, 1024), f32(16384 // scale)


def max_rows_backward():  # as torch.amax: ties share the gradient evenly
    mask = x == x.max(axis=1, keepdims=True)
    return mask * (g / mask.sum(axis=1))[:, None]


report("backward_max_rows", median_time(max_rows_backward))

try:
    import einops
    x = f32(2, 3, 8, 8)
    report("einops_rearrange_small", median_time(lambda: einops.rearrange(x, "b c h w -> b h w c"), calls=2000))
except ImportError:
    pass
q, k = f32(2, 4, 8), f32(2, 5, 8)
report("numpy_einsum_optimize_small", median_time(lambda: np.einsum("bid,bjd->bij", q, k, optimize=True), calls=2000))
