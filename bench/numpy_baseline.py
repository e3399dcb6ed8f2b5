#!/usr/bin/env python3
"""numpy's (and einops') times for the cases of cpu_bench.

    numpy_baseline.py [--quick]           every case, printed as `key seconds` lines (median of 9 runs)
    numpy_baseline.py [--quick] --serve   `key runs` lines on standard input; for each, one run of the case
                                          untimed, then the median seconds per call of `runs` timed runs,
                                          a line on standard output (0 for a case it does not have)

cpu_bench serves itself from the second form, a run at a time in turns with einc's (a case's operands are
kept while it is asked for again), so that numpy and einc are timed by turns.
Nothing is printed (and --serve answers nothing) if numpy is missing.
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
half = 1 if scale == 1 else 2
big = 1024 if quick else 2048

rng = np.random.default_rng(0)
f32 = lambda *shape: rng.standard_normal(shape, dtype=np.float32)


# gradients, written the obvious numpy way (cpu_bench's "backward" group): every input's gradient
def backward_linear():
    x, w, g = f32(8 // scale, 512, 1024), f32(1024, 1024), f32(8 // scale, 512, 1024)
    return lambda: (np.einsum("bse,de->bsd", g, w, optimize=True), np.einsum("bsd,bse->de", x, g, optimize=True))


def backward_attention_natural():
    q, k, g = f32(8 // scale, 197, 12, 64), f32(8 // scale, 197, 12, 64), f32(8 // scale, 12, 197, 197)
    return lambda: (np.einsum("bhij,bjhd->bihd", g, k, optimize=True), np.einsum("bhij,bihd->bjhd", g, q, optimize=True))


def backward_max_rows():
    x, g = f32(16384 // scale, 1024), f32(16384 // scale)

    def work():  # as torch.amax: ties share the gradient evenly
        mask = x == x.max(axis=1, keepdims=True)
        return mask * (g / mask.sum(axis=1))[:, None]
    return work


def einops_rearrange():
    import einops
    x = f32(2, 3, 8, 8)
    return lambda: einops.rearrange(x, "b c h w -> b h w c")


def einsum(pattern, *shapes):
    operands = [f32(*shape) for shape in shapes]
    return lambda: np.einsum(pattern, *operands, optimize=True)


def unary(shape, work):
    x = f32(*shape)
    return lambda: work(x)


# key: (a function making the work's operands and returning the work, calls per timing)
CASES = {
    "transpose_4096": (lambda: unary((4096 // half, 4096 // half), lambda x: np.ascontiguousarray(x.T)), 1),
    "nchw_to_nhwc": (lambda: unary((16 // scale, 64, 128, 128), lambda x: np.ascontiguousarray(x.transpose(0, 2, 3, 1))), 1),
    "heads_split": (lambda: unary((8 // scale, 512, 16 * 128),
                                  lambda x: np.ascontiguousarray(x.reshape(8 // scale, 512, 16, 128).transpose(0, 2, 1, 3))), 1),
    "perm6d": (lambda: unary((8, 8, 16 // scale, 16, 8, 32), lambda x: np.ascontiguousarray(x.transpose(5, 3, 1, 4, 2, 0))), 1),
    "perm6d_large": (lambda: unary((8, 8, 16 // scale, 16, 8, 128), lambda x: np.ascontiguousarray(x.transpose(5, 3, 1, 4, 2, 0))), 1),
    "transpose_inner4": (lambda: unary((7840000 // scale, 4), lambda x: np.ascontiguousarray(x.T)), 1),
    "nhwc_to_nchw_c3": (lambda: unary((64 // scale, 224, 224, 3), lambda x: np.ascontiguousarray(x.transpose(0, 3, 1, 2))), 1),
    "perm5d_reverse": (lambda: unary((16 // scale, 16, 32, 32, 32), lambda x: np.ascontiguousarray(x.transpose(4, 3, 2, 1, 0))), 1),
    "nchw_to_nhwc_c3": (lambda: unary((64 // scale, 3, 224, 224), lambda x: np.ascontiguousarray(x.transpose(0, 2, 3, 1))), 1),
    "perm3d_in_cache": (lambda: unary((128, 128, 64 // scale), lambda x: np.ascontiguousarray(x.transpose(2, 1, 0))), 1),
    "sum_inner_4096": (lambda: unary((4096 // scale, 4096), lambda x: x.sum(axis=1)), 1),
    "sum_outer_4096": (lambda: unary((4096 // scale, 4096), lambda x: x.sum(axis=0)), 1),
    "sum_all_4096": (lambda: unary((4096 // scale, 4096), lambda x: x.sum()), 1),
    "sum_inner_32768x32": (lambda: unary((32768 * 16 // scale, 32), lambda x: x.sum(axis=1)), 1),
    "sum_outer_32768x32": (lambda: unary((32768 * 16 // scale, 32), lambda x: x.sum(axis=0)), 1),
    "sum_inner_7840000x4": (lambda: unary((7840000 // scale, 4), lambda x: x.sum(axis=1)), 1),
    "sum_outer_7840000x4": (lambda: unary((7840000 // scale, 4), lambda x: x.sum(axis=0)), 1),
    "max_inner_32768x32": (lambda: unary((32768 * 16 // scale, 32), lambda x: x.max(axis=1)), 1),
    "min_inner_32768x32": (lambda: unary((32768 * 16 // scale, 32), lambda x: x.min(axis=1)), 1),
    "sum_mid_64x256": (lambda: unary((1024 // scale, 64, 256), lambda x: x.sum(axis=1)), 1),
    "max_mid": (lambda: unary((64 // scale, 512, 512), lambda x: x.max(axis=1)), 1),
    "mean_pool": (lambda: unary((16 // scale, 64, 128, 128), lambda x: x.reshape(16 // scale, 64, 64, 2, 64, 2).mean(axis=(3, 5))), 1),
    "matmul": (lambda: einsum("ik,kj->ij", (big, big), (big, big)), 1),
    "attention_scores": (lambda: einsum("bid,bjd->bij", (32, 512, 64), (32, 512, 64)), 1),
    "linear": (lambda: einsum("bsd,de->bse", (8, 512, 1024), (1024, 1024)), 1),
    "matmul_c64": (lambda: (lambda a, b: lambda: a @ b)(
        *[(f32(1024 // half, 1024 // half) + 1j * f32(1024 // half, 1024 // half)).astype(np.complex64) for _ in range(2)]), 1),
    # the call classes numpy is the obvious line for (cpu_bench's "vs numpy" group)
    "elementwise_product": (lambda: einsum("ij,ij->ij", (2048 // scale, 2048), (2048 // scale, 2048)), 1),
    "scale_rows": (lambda: einsum("bse,e->bse", (8 // scale, 512, 1024), (1024,)), 1),
    "dot": (lambda: einsum("i,i->", (4194304 // scale,), (4194304 // scale,)), 1),
    "matvec": (lambda: einsum("ij,j->i", (4096 // scale, 4096), (4096,)), 1),
    "row_dot": (lambda: einsum("bij,bij->b", (64 // scale, 256, 256), (64 // scale, 256, 256)), 1),
    "max_all": (lambda: unary((16777216 // scale,), lambda x: x.max()), 1),
    "max_rows": (lambda: unary((16384 // scale, 1024), lambda x: x.max(axis=1)), 1),
    "attention_natural": (lambda: einsum("bihd,bjhd->bhij", (8 // scale, 197, 12, 64), (8 // scale, 197, 12, 64)), 1),
    "perm3d": (lambda: unary((256 // scale, 256, 256), lambda x: np.ascontiguousarray(x.transpose(2, 1, 0))), 1),
    "perm5d": (lambda: unary((16 // scale, 16, 32, 32, 32), lambda x: np.ascontiguousarray(x.transpose(4, 2, 0, 3, 1))), 1),
    "pack_f32_i32": (lambda: (lambda a, b: lambda: np.concatenate([a, b], axis=1))(
        f32(2048 // scale, 4096), rng.integers(-100, 100, (2048 // scale, 4096), dtype=np.int32)), 1),
    "pack_f16_f32": (lambda: (lambda a, b: lambda: np.concatenate([a, b], axis=1))(
        f32(2048 // scale, 4096).astype(np.float16), f32(2048 // scale, 4096)), 1),
    "backward_linear": (backward_linear, 1),
    "backward_attention_natural": (backward_attention_natural, 1),
    "backward_max_rows": (backward_max_rows, 1),
    "einops_rearrange_small": (einops_rearrange, 2000),
    "numpy_einsum_optimize_small": (lambda: einsum("bid,bjd->bij", (2, 4, 8), (2, 5, 8)), 2000),
}


def seconds_per_call(work, calls):
    start = time.perf_counter()
    for _ in range(calls):
        work()
    return (time.perf_counter() - start) / calls


def median_seconds(work, calls, runs):
    work()
    times = sorted(seconds_per_call(work, calls) for _ in range(runs))
    return times[len(times) // 2]


def serve():
    key, work = None, None  # the case asked for last, kept while it is asked for again
    for line in sys.stdin:
        asked, runs = (line.split() + ["1"])[:2]
        if asked != key:
            key, work = asked, None  # the last case's operands go before the next case's come
            make, calls = CASES.get(key, (None, 1))
            try:
                work = make() if make else None
            except ImportError:
                work = None
        print(f"{median_seconds(work, calls, max(int(runs), 1)):.9g}" if work else 0, flush=True)


def report_all():
    for key, (make, calls) in CASES.items():
        try:
            work = make()
        except ImportError:
            continue
        print(f"{key} {median_seconds(work, calls, 3 if quick else 9):.9g}", flush=True)


if __name__ == "__main__":
    serve() if "--serve" in sys.argv else report_all()
