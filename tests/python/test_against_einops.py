"""Random calls of every operation, run by einc and by einops on the same numpy arrays: einops is the
reference. Each case is drawn from its seed, so a failure names the seed that reproduces it."""

import random

import numpy as np
import pytest

einops = pytest.importorskip("einops", reason="einops is the reference: pip install einops")
einc = pytest.importorskip("einc", reason="the einc module is not built (pip install nanobind, then build)")

CASES = 150  # per operation
NAMES = "abcdefgh"
DTYPES = ["float64", "float32", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "bool"]
MOVED_DTYPES = DTYPES + ["complex64", "complex128"]
ORDERS = ["C", "F", "sliced", "reversed", "transposed"]


def array(rng, shape, dtype, order):
    """A numpy array of `shape` and `dtype`, laid out in memory as `order` says."""
    np_rng = np.random.default_rng(rng.randrange(1 << 30))
    if not shape:  # a 0-dim array has no strides to vary (and indexing it gives a scalar)
        order = "C"
    if order == "sliced":  # every other element of a larger array: non-unit strides
        return array(rng, tuple(2 * n for n in shape), dtype, "C")[tuple(slice(None, None, 2) for _ in shape)]
    if order == "reversed":  # negative strides
        return array(rng, shape, dtype, "C")[tuple(slice(None, None, -1) for _ in shape)]
    if order == "transposed":  # a permuted view of a C array
        return array(rng, shape[::-1], dtype, "C").T
    if dtype == "bool":
        values = np_rng.random(shape) < 0.5
    elif dtype.startswith("int"):
        values = np_rng.integers(-5, 6, size=shape)  # small: products and sums stay exact in int8
    elif dtype.startswith("uint"):
        values = np_rng.integers(0, 256, size=shape)  # sums and products wrap: numpy's result all the same
    else:
        values = np_rng.standard_normal(shape)
        if dtype.startswith("complex"):
            values = values + 1j * np_rng.standard_normal(shape)
    return np.asarray(values, dtype=dtype, order=order)


def assert_same(ours, reference):
    assert type(ours) is np.ndarray
    assert ours.shape == reference.shape
    assert ours.dtype == reference.dtype, f"einc gave {ours.dtype}, einops {reference.dtype}"
    if ours.dtype.kind in "fc":  # (complex: the tolerance of its parts)
        tolerance = {2: 2e-2, 4: 1e-4, 8: 1e-10}[ours.dtype.itemsize // (2 if ours.dtype.kind == "c" else 1)]
        np.testing.assert_allclose(ours, reference, rtol=tolerance, atol=tolerance)
    else:
        np.testing.assert_array_equal(ours, reference)


def random_sides(rng, rank):
    """Axis names and lengths, and a rearrange pattern over them: some input axes composed of two (one
    length given by keyword), the output a permutation with some neighbours merged."""
    names = NAMES[:rank]
    lengths = {name: rng.randint(1, 4) for name in names}
    left, kwargs, i = [], {}, 0
    while i < rank:
        if i + 1 < rank and rng.random() < 0.3:
            left.append(f"({names[i]} {names[i + 1]})")
            kwargs[names[i + 1]] = lengths[names[i + 1]]
            i += 2
        else:
            left.append(names[i])
            i += 1
    order = list(names)
    rng.shuffle(order)
    right, i = [], 0
    while i < rank:
        if i + 1 < rank and rng.random() < 0.3:
            right.append(f"({order[i]} {order[i + 1]})")
            i += 2
        else:
            right.append(order[i])
            i += 1
    return left, right, lengths, kwargs


def input_shape(left, lengths):
    shape = []
    for group in left:
        size = 1
        for name in group.strip("()").split():
            size *= lengths[name]
        shape.append(size)
    return tuple(shape)


@pytest.mark.parametrize("seed", range(CASES))
def test_rearrange(seed):
    rng = random.Random(seed)
    left, right, lengths, kwargs = random_sides(rng, rng.randint(1, 5))
    x = array(rng, input_shape(left, lengths), rng.choice(MOVED_DTYPES), rng.choice(ORDERS))
    pattern = f"{' '.join(left)} -> {' '.join(right)}"
    assert_same(einc.rearrange(x, pattern, **kwargs), einops.rearrange(x, pattern, **kwargs))


@pytest.mark.parametrize("seed", range(CASES))
def test_rearrange_list(seed):
    rng = random.Random(seed)
    left, right, lengths, kwargs = random_sides(rng, rng.randint(1, 4))
    dtype, order = rng.choice(MOVED_DTYPES), rng.choice(ORDERS)
    xs = [array(rng, input_shape(left, lengths), dtype, order) for _ in range(rng.randint(1, 3))]
    pattern = f"n {' '.join(left)} -> {' '.join(right)} n"
    assert_same(einc.rearrange(xs, pattern, **kwargs), einops.rearrange(xs, pattern, **kwargs))


def reductions_for(dtype):
    """What einops (numpy) and einc both reduce this dtype with (einops refuses a mean of integers)."""
    if dtype == "bool":
        return ["max", "min", "any", "all", "sum"]
    if dtype.startswith("int") or dtype.startswith("uint"):
        return ["sum", "max", "min", "prod"]
    if dtype.startswith("complex"):  # (einops refuses their mean; einc their order)
        return ["sum", "prod"]
    return ["sum", "mean", "max", "min", "prod"]


@pytest.mark.parametrize("seed", range(CASES))
def test_reduce(seed):
    rng = random.Random(seed)
    left, right, lengths, kwargs = random_sides(rng, rng.randint(1, 5))
    dtype = rng.choice(MOVED_DTYPES)
    reduction = rng.choice(reductions_for(dtype))
    x = array(rng, input_shape(left, lengths), dtype, rng.choice(ORDERS))
    kept = [name for name in lengths if rng.random() < 0.5]
    right = [name for name in " ".join(right).replace("(", " ").replace(")", " ").split() if name in kept]
    # a bracketed group of kept axes, now and then (merged in the output)
    if len(right) >= 2 and rng.random() < 0.3:
        right = [f"({right[0]} {right[1]})"] + right[2:]
    pattern = f"{' '.join(left)} -> {' '.join(right)}"
    assert_same(einc.reduce(x, pattern, reduction, **kwargs), einops.reduce(x, pattern, reduction, **kwargs))


@pytest.mark.parametrize("seed", range(CASES))
def test_repeat(seed):
    rng = random.Random(seed)
    rank = rng.randint(0, 3)
    names = list(NAMES[:rank])
    lengths = {name: rng.randint(1, 3) for name in names}
    x = array(rng, tuple(lengths[n] for n in names), rng.choice(MOVED_DTYPES), rng.choice(ORDERS))
    right, kwargs = list(names), {}
    for new in "xyz"[: rng.randint(1, 2)]:  # new axes, at random places
        kwargs[new] = rng.randint(1, 3)
        right.insert(rng.randint(0, len(right)), new)
    if names and rng.random() < 0.4:  # an existing axis repeated in place: (a 2)
        i = right.index(rng.choice(names))
        right[i] = f"({right[i]} {rng.randint(2, 3)})"
    if len(right) >= 2 and "(" not in right[0] + right[1] and rng.random() < 0.3:
        right = [f"({right[0]} {right[1]})"] + right[2:]
    pattern = f"{' '.join(names)} -> {' '.join(right)}"
    assert_same(einc.repeat(x, pattern, **kwargs), einops.repeat(x, pattern, **kwargs))


@pytest.mark.parametrize("seed", range(CASES))
def test_einsum(seed):
    rng = random.Random(seed)
    lengths = {name: rng.randint(1, 5) for name in NAMES[:6]}
    operands = []
    for _ in range(rng.randint(1, 3)):
        operands.append(rng.sample(list(lengths), rng.randint(1, 3)))
    seen = sorted({name for axes in operands for name in axes})
    output = [name for name in seen if rng.random() < 0.5]
    rng.shuffle(output)
    dtype = rng.choice(["float64", "float32", "int32", "int64", "complex64", "complex128"])
    order = rng.choice(ORDERS)
    xs = [array(rng, tuple(lengths[n] for n in axes), dtype, order) for axes in operands]
    pattern = ", ".join(" ".join(axes) for axes in operands) + " -> " + " ".join(output)
    assert_same(einc.einsum(*xs, pattern), einops.einsum(*xs, pattern))


@pytest.mark.parametrize("seed", range(CASES))
def test_pack_and_unpack(seed):
    rng = random.Random(seed)
    before, after = rng.randint(0, 2), rng.randint(0, 2)
    shared = [rng.randint(1, 4) for _ in range(before + after)]
    dtype, order = rng.choice(MOVED_DTYPES), rng.choice(ORDERS)
    xs = []
    for _ in range(rng.randint(1, 3)):
        packed_dims = tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
        shape = tuple(shared[:before]) + packed_dims + tuple(shared[before:])
        xs.append(array(rng, shape, dtype, order))
    pattern = " ".join(["a", "b"][:before] + ["*"] + ["c", "d"][:after])
    packed, shapes = einc.pack(xs, pattern)
    reference, reference_shapes = einops.pack(xs, pattern)
    assert_same(packed, reference)
    assert [tuple(s) for s in shapes] == [tuple(s) for s in reference_shapes]
    unpacked = einc.unpack(packed, shapes, pattern)
    assert len(unpacked) == len(xs)
    for ours, theirs in zip(unpacked, einops.unpack(reference, reference_shapes, pattern)):
        assert_same(ours, theirs)


@pytest.mark.parametrize("seed", range(CASES))
def test_parse_shape(seed):
    rng = random.Random(seed)
    shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(0, 4)))
    names = [rng.choice([n, "_"]) for n in NAMES[: len(shape)]]
    if names and rng.random() < 0.3:  # an ellipsis for the leading dims
        names = ["..."] + names[rng.randint(1, len(names)) :]
    x = np.zeros(shape)
    pattern = " ".join(names)
    assert einc.parse_shape(x, pattern) == einops.parse_shape(x, pattern)
