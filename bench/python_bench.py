#!/usr/bin/env python3
"""Host time per cached call of the Python module, einc beside einops, on small arrays: what a Python
user pays per call when the work itself is nearly free.

Each call is made once (einc plans it and caches the plan; einops caches its recipe), then timed by
turns with einops': in each of --repeats rounds, --number calls of each; the best round, per call. Rows: rearrange as a view
and as a copy, reduce and einsum, on numpy arrays, on torch CPU tensors where torch is installed, and on
torch CUDA tensors where a GPU is visible to torch (synchronised after each round, not each call).

    PYTHONPATH=build/python python bench/python_bench.py [--markdown FILE]
"""

import argparse
import platform
import sys
import timeit

import einops
import numpy as np

import einc

CALLS = [
    # (name, function, pattern arguments, operand shapes)
    ("rearrange (view)", "rearrange", ("b h w c -> b c h w",), [(4, 8, 8, 3)]),
    ("rearrange (copy)", "rearrange", ("b h w c -> b (c h w)",), [(4, 8, 8, 3)]),
    ("reduce (mean)", "reduce", ("b h w c -> b c", "mean"), [(4, 8, 8, 3)]),
    ("einsum (GEMM)", "einsum", ("b i d, b j d -> b i j",), [(2, 16, 8), (2, 16, 8)]),
]


def call(module, function, operands, arguments):
    if function == "einsum":
        return lambda: module.einsum(*operands, *arguments)
    return lambda: getattr(module, function)(operands[0], *arguments)


def seconds_per_call(runs, number, repeats, synchronize=None):
    """The best time per call of each of `runs`, timed by turns - in each round a batch of `number` calls
    of each - so that all of them see the same moments of a shared machine."""
    for run in runs:
        run()  # planned and cached

    def batch(run):
        for _ in range(number):
            run()
        if synchronize:
            synchronize()

    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for i, run in enumerate(runs):
            best[i] = min(best[i], timeit.timeit(lambda: batch(run), number=1) / number)
    return best


def kinds_of_array():
    kinds = [("numpy", lambda shape: np.random.default_rng(0).standard_normal(shape).astype(np.float32), None)]
    try:
        import torch
    except ImportError:
        print("torch is not installed: numpy rows only", file=sys.stderr)
        return kinds
    kinds.append(("torch cpu", lambda shape: torch.randn(shape), None))
    if torch.cuda.is_available():
        kinds.append(("torch cuda", lambda shape: torch.randn(shape, device="cuda"), torch.cuda.synchronize))
    return kinds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per round")
    parser.add_argument("--repeats", type=int, default=7, help="rounds; the best is kept")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()

    rows = []
    for kind, make, synchronize in kinds_of_array():
        for name, function, arguments, shapes in CALLS:
            operands = [make(shape) for shape in shapes]
            ours, theirs = seconds_per_call(
                [call(einc, function, operands, arguments), call(einops, function, operands, arguments)],
                args.number, args.repeats, synchronize)
            rows.append((kind, name, ours, theirs))

    lines = ["| array | call | einc (us) | einops (us) | einc / einops |", "|---|---|---:|---:|---:|"]
    for kind, name, ours, theirs in rows:
        lines.append(f"| {kind} | {name} | {ours * 1e6:.2f} | {theirs * 1e6:.2f} | {ours / theirs:.2f} |")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(f"Python {platform.python_version()}, numpy {np.__version__}, einops {einops.__version__}, "
                      f"{platform.processor() or platform.machine()}; best of {args.repeats} rounds of "
                      f"{args.number} calls.\n\n{table}\n")


if __name__ == "__main__":
    main()
