#!/usr/bin/env python3
"""PyTorch's and einops' times for the cases of gpu_bench, printed as `key seconds` lines.

gpu_bench runs this once and shows the numbers beside its own; it prints nothing if PyTorch or a GPU is
missing. Keys, patterns and shapes follow gpu_bench.cpp (--quick: a quarter of the large sizes).
GPU times are medians of CUDA-event timings; the dispatch cases are host times per call.
"""
import sys
import time

try:
    import torch
except ImportError:
    sys.exit(0)
if not torch.cuda.is_available():
    sys.exit(0)
try:
    import einops
except ImportError:
    einops = None

quick = "--quick" in sys.argv
scale = 4 if quick else 1
repeats = 5 if quick else 15
torch.backends.cuda.matmul.allow_tf32 = False  # einc's f32 GEMMs are exact unless asked otherwise


def report(key, seconds):
    print(f"{key} {seconds:.9g}", flush=True)


def gpu_time(work, nbytes=0):
    calls = int(min(max(2e9 / max(nbytes, 1), 5), 200)) if nbytes else 5
    for _ in range(2):
        work()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        for _ in range(calls):
            work()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3 / calls)
    return sorted(times)[len(times) // 2]


def host_time(work, calls):
    work()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            work()
        times.append((time.perf_counter() - start) / calls)
    torch.cuda.synchronize()
    return sorted(times)[2]


def random(dtype, *shape):
    return torch.rand(shape, device="cuda", dtype=torch.float32).mul_(2).sub_(1).to(dtype)


f32, bf16 = torch.float32, torch.bfloat16

# ---- permutations: permute(...).contiguous() ------------------------------------------------------------
permutations = [
    ("transpose_4096", f32, (4096, 4096), (1, 0)),
    ("transpose_8192", f32, (8192 // scale, 8192), (1, 0)),
    ("heads_split", bf16, (8 // scale, 2048, 16, 128), (0, 2, 1, 3)),
    ("heads_merge", bf16, (8 // scale, 16, 2048, 128), (0, 2, 1, 3)),
    ("qkv_split", bf16, (8 // scale, 2048, 3, 16, 128), (2, 0, 3, 1, 4)),
    ("nchw_to_nhwc", f32, (64 // scale, 3, 224, 224), (0, 2, 3, 1)),
    ("transpose_7840000x4", f32, (7840000 // scale, 4), (1, 0)),
    # "a b c d e f -> f d b e c a", "-> c f a e b d", "-> b e f a d c"
    ("perm6d_0", f32, (16 // scale, 32, 16, 32, 16, 16), (5, 3, 1, 4, 2, 0)),
    ("perm6d_1", f32, (16 // scale, 32, 16, 32, 16, 16), (2, 5, 0, 4, 1, 3)),
    ("perm6d_2", f32, (16 // scale, 32, 16, 32, 16, 16), (1, 4, 5, 0, 3, 2)),
    ("transpose_8xN_f32", f32, (8, 8388608 // scale), (1, 0)),
    ("transpose_8xN_bf16", bf16, (8, 16777216 // scale), (1, 0)),
    ("transpose_Nx8_bf16", bf16, (16777216 // scale, 8), (1, 0)),
    ("channels_last_16", f32, (16 // scale, 16, 512, 512), (0, 2, 3, 1)),
    ("channels_first_16", f32, (16 // scale, 512, 512, 16), (0, 3, 1, 2)),
    ("permute3d", f32, (256 // scale, 512, 512), (2, 1, 0)),
    # "a b c d e -> e c a d b"
    ("permute5d", f32, (32 // scale, 32, 32, 32, 64), (4, 2, 0, 3, 1)),
    ("transpose_bf16", bf16, (8192 // scale, 16384), (1, 0)),
]
for key, dtype, shape, order in permutations:
    x = random(dtype, *shape)
    report(key, gpu_time(lambda: x.permute(*order).contiguous(), 2 * x.numel() * x.element_size()))
    del x

# ---- reductions: torch.sum / amax / mean ----------------------------------------------------------------
reductions = [
    ("sum_inner_32768x32", f32, (32768, 32), torch.sum, (1,)),
    ("sum_outer_32768x32", f32, (32768, 32), torch.sum, (0,)),
    ("sum_all_32768x32", f32, (32768, 32), torch.sum, None),
    ("sum_inner_7840000x4", f32, (7840000 // scale, 4), torch.sum, (1,)),
    ("sum_outer_7840000x4", f32, (7840000 // scale, 4), torch.sum, (0,)),
    ("sum_all_7840000x4", f32, (7840000 // scale, 4), torch.sum, None),
    ("amax_scores", bf16, (8 // scale, 16, 2048, 2048), torch.amax, (3,)),
    ("sum_scores_outer", bf16, (8 // scale, 16, 2048, 2048), torch.sum, (2,)),
    ("mean_tokens", bf16, (8 // scale, 2048, 2048), torch.mean, (1,)),
    ("sum_outer_8", f32, (8388608 // scale, 8), torch.sum, (0,)),
    ("max_outer_2_bf16", bf16, (67108864 // scale, 2), torch.amax, (0,)),
    ("sum_outer_32_bf16", bf16, (4194304 // scale, 32), torch.sum, (0,)),
    ("sum_all", f32, (67108864 // scale,), torch.sum, None),
    ("max_all_bf16", bf16, (134217728 // scale,), torch.amax, None),
    ("sum_middle", f32, (64 // scale, 1024, 1024), torch.sum, (1,)),
    ("sum_inner_2_bf16", bf16, (67108864 // scale, 2), torch.sum, (1,)),
    ("sum_inner_65536", f32, (1024 // scale, 65536), torch.sum, (1,)),
]
for key, dtype, shape, op, dims in reductions:
    x = random(dtype, *shape)
    work = (lambda: op(x)) if dims is None else (lambda: op(x, dim=dims))
    report(key, gpu_time(work, x.numel() * x.element_size()))
    del x

# ---- einsums: torch.einsum and einops.einsum --------------------------------------------------------------
b = 8 // scale
contractions = [
    ("attention_scores", "bhid,bhjd->bhij", "b h i d, b h j d -> b h i j", bf16, (b, 16, 2048, 128), (b, 16, 2048, 128)),
    ("attention_values", "bhij,bhjd->bhid", "b h i j, b h j d -> b h i d", bf16, (b, 16, 2048, 2048), (b, 16, 2048, 128)),
    ("projection", "bse,ef->bsf", "b s e, e f -> b s f", bf16, (b, 2048, 2048), (2048, 2048)),
    ("mlp_up", "bse,fe->bsf", "b s e, f e -> b s f", bf16, (b, 2048, 2048), (8192, 2048)),
    ("matmul_f32", "ik,kj->ij", "i k, k j -> i j", f32, (4096, 4096), (4096, 4096)),
    ("matmul_c64", "ik,kj->ij", "i k, k j -> i j", torch.complex64, (4096, 4096), (4096, 4096)),
]
for key, subscripts, pattern, dtype, a_shape, b_shape in contractions:
    x, y = random(dtype, *a_shape), random(dtype, *b_shape)
    report(key, gpu_time(lambda: torch.einsum(subscripts, x, y)))
    if einops is not None:
        report("einops_" + key, gpu_time(lambda: einops.einsum(x, y, pattern)))
    del x, y

# ---- dispatch: host time of a small call ----------------------------------------------------------------------
if einops is not None:
    small = random(f32, 2, 3, 8, 8)
    report("einops_rearrange_small", host_time(lambda: einops.rearrange(small, "b c h w -> b h w c"), 20000))
    report("einops_reduce_small", host_time(lambda: einops.reduce(small, "b c h w -> b c", "sum"), 20000))
