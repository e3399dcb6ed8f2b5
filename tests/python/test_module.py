"""What the Python module adds to einc's calls: results of the input's type that share its memory where
einc plans a view, einc's errors as einc.EincError, the GIL released, explain and dims."""

import gc
import sys
import threading
import time

import numpy as np
import pytest

einc = pytest.importorskip("einc", reason="the einc module is not built (pip install nanobind, then build)")


def test_a_permutation_is_a_view_as_numpys_transpose():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = einc.rearrange(x, "a b c -> c a b")
    assert np.shares_memory(x, y)
    np.testing.assert_array_equal(y, x.transpose(2, 0, 1))
    y[0, 0, 0] = -1  # writable, as numpy's views of a writable array are
    assert x[0, 0, 0] == -1


def test_a_split_and_merge_of_contiguous_axes_is_a_view():
    x = np.arange(24.0).reshape(6, 4)
    y = einc.rearrange(x, "(a b) c -> a (b c)", b=2)
    assert np.shares_memory(x, y)
    np.testing.assert_array_equal(y, x.reshape(3, 8))


def test_a_copy_does_not_share_memory():
    x = np.arange(24.0).reshape(2, 3, 4)
    y = einc.rearrange(x, "a b c -> (c a) b")
    assert not np.shares_memory(x, y)
    np.testing.assert_array_equal(y, x.transpose(2, 0, 1).reshape(8, 3))


def test_a_view_outlives_the_name_of_its_input():
    y = einc.rearrange(np.arange(6.0).reshape(2, 3), "a b -> b a")
    np.testing.assert_array_equal(y, np.arange(6.0).reshape(2, 3).T)


def test_a_view_of_a_read_only_array_is_read_only():
    x = np.arange(6.0).reshape(2, 3)
    x.flags.writeable = False
    y = einc.rearrange(x, "a b -> b a")
    assert np.shares_memory(x, y) and not y.flags.writeable


def test_a_repeat_along_a_new_axis_is_a_read_only_view_as_broadcast_to():
    x = np.arange(3.0)
    y = einc.repeat(x, "a -> a r", r=4)
    np.testing.assert_array_equal(y, np.broadcast_to(x[:, None], (3, 4)))
    assert np.shares_memory(x, y) and y.strides[1] == 0 and not y.flags.writeable


def test_unpack_returns_views_of_the_packed_tensor():
    packed = np.arange(20.0).reshape(2, 10)
    parts = einc.unpack(packed, [(2,), (2, 4)], "b *")
    assert [p.shape for p in parts] == [(2, 2), (2, 2, 4)]
    assert all(np.shares_memory(packed, p) for p in parts)


def test_a_list_is_stacked_into_a_fresh_tensor():
    xs = [np.full((2, 3), float(i)) for i in range(4)]
    y = einc.rearrange(xs, "n a b -> a b n")
    assert not any(np.shares_memory(x, y) for x in xs)
    np.testing.assert_array_equal(y, np.stack(xs).transpose(1, 2, 0))


def test_a_fresh_result_owns_its_memory():
    y = einc.reduce(np.ones((4, 5), dtype=np.float32), "a b -> b", "sum")
    gc.collect()
    others = [einc.reduce(np.zeros((4, 5), dtype=np.float32), "a b -> b", "sum") for _ in range(10)]
    np.testing.assert_array_equal(y, np.full(5, 4.0, dtype=np.float32))
    assert not any(np.shares_memory(y, other) for other in others)


def test_errors_are_einc_errors_with_the_caret():
    with pytest.raises(einc.EincError) as error:
        einc.rearrange(np.zeros((2, 3, 12)), "b h (h w) -> b w h")
    assert isinstance(error.value, ValueError)
    message = str(error.value)
    assert "axis 'h' appears twice on the left side of rearrange" in message
    assert "b h (h w) -> b w h\n    ^  ~" in message


def test_a_shape_mismatch_is_an_einc_error():
    with pytest.raises(einc.EincError, match="12"):
        einc.rearrange(np.zeros((2, 12)), "a (b c) -> a b c", b=5)


def test_an_unknown_reduction_suggests_the_right_one():
    with pytest.raises(einc.EincError, match="did you mean 'mean'"):
        einc.reduce(np.zeros((2, 3)), "a b -> a", "maen")


def test_a_dtype_einc_does_not_take_is_an_einc_error():
    with pytest.raises(einc.EincError, match="clongdouble|complex256"):
        einc.rearrange(np.zeros((2, 3), dtype=np.clongdouble), "a b -> b a")
    with pytest.raises(einc.EincError, match="max of c128 tensors is not defined"):
        einc.reduce(np.zeros((2, 3), dtype=np.complex128), "a b -> a", "max")


# Differences from einops (docs/python.md), each asserted so that the list stays true.
def test_differences_from_einops():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    mean = einc.reduce(x, "a b -> a", "mean")  # einops raises; numpy gives float64
    assert mean.dtype == np.float64 and np.array_equal(mean, x.mean(axis=1))
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(6, dtype=np.int64).reshape(3, 2)
    product = einc.einsum(a, b, "a b, b c -> a c")  # promoted as numpy: float64
    assert product.dtype == np.float64 and np.array_equal(product, np.einsum("ab,bc->ac", a, b))
    with pytest.raises(TypeError):
        einc.reduce(np.ones((2, 3)), "a b -> a", np.sum)  # reductions by name only


def test_a_full_reduction_is_a_0_dim_array_not_a_numpy_scalar():
    y = einc.reduce(np.ones((2, 3)), "a b ->", "sum")
    assert type(y) is np.ndarray and y.shape == () and y == 6


def test_reduce_takes_rearrange_as_einops_does():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(einc.reduce(x, "a b -> b a", "rearrange"), x.T)


def test_einsum_takes_the_pattern_last():
    a, b = np.ones((2, 3)), np.ones((3, 4))
    np.testing.assert_array_equal(einc.einsum(a, b, "i k, k j -> i j"), a @ b)
    with pytest.raises(TypeError):
        einc.einsum("i k, k j -> i j", a, b)


def test_explain_prints_the_plan_and_its_json_form():
    q = np.ones((2, 8, 4), dtype=np.float32)
    text = einc.explain("einsum", q, q, "b i d, b j d -> b i j")
    assert "gemm" in text and "total:" in text
    plan = einc.explain_json("rearrange", q, "b i d -> b d i")
    assert plan["op"] == "rearrange" and plan["dtype"] == "f32"
    assert plan["inputs"][0]["shape"] == [2, 8, 4] and plan["outputs"][0]["shape"] == [2, 4, 8]
    assert [step["kind"] for step in plan["steps"]] == ["view"]


def test_dims_enforces_named_dimensions():
    d = einc.dims()
    d.check(np.zeros((2, 5, 8)), "batch seq hidden")
    assert d["hidden"] == 8 and "seq" in d and d.sizes() == {"batch": 2, "seq": 5, "hidden": 8}
    with pytest.raises(einc.EincError, match="hidden"):
        d.check(np.zeros((2, 5, 7)), "batch seq hidden")


def test_the_gil_is_released_while_einc_runs():
    # With a switch interval of 1000 s the main thread keeps the GIL unless it releases it, so the other
    # thread counts only while einc runs with the GIL released; held, the count could not move.
    x = np.ones((1024, 4096), dtype=np.float32)
    einc.reduce(x, "a b -> a", "sum")  # planned and cached
    stop, started, count = threading.Event(), threading.Event(), [0]

    def counter():
        started.set()
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)  # gives the GIL back at once

    thread = threading.Thread(target=counter)
    thread.start()
    started.wait()
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1000)
    try:
        before = count[0]
        for _ in range(20):
            einc.reduce(x, "a b -> a", "sum")
        during = count[0] - before
    finally:
        sys.setswitchinterval(previous)
        stop.set()
        thread.join()
    assert during > 0
