"""einc.backward - einc's gradient programs (einc::gradient) - against gradients written out in numpy:
what a torch.autograd.Function over einc would run in its backward."""

import numpy as np
import pytest

einc = pytest.importorskip("einc", reason="the einc module is not built (pip install nanobind, then build)")

rng = np.random.default_rng(0)


def random(*shape):
    return rng.standard_normal(shape)


def test_einsum_gradients_are_the_two_gemms():
    a, b, dy = random(3, 4), random(4, 5), random(3, 5)
    da, db = einc.backward(dy, "einsum", a, b, "i k, k j -> i j")
    np.testing.assert_allclose(da, dy @ b.T, rtol=1e-12)
    np.testing.assert_allclose(db, a.T @ dy, rtol=1e-12)


def test_a_rearranges_gradient_is_the_inverse_rearrange():
    x, dy = random(2, 6, 4), random(4, 2, 6)
    (dx,) = einc.backward(dy, "rearrange", x, "b (h w) c -> c b (h w)", h=3)
    np.testing.assert_array_equal(dx, dy.transpose(1, 2, 0))


def test_reduce_gradients():
    x, dy = random(2, 3, 4), random(2, 4)
    (dx,) = einc.backward(dy, "reduce", x, "a b c -> a c", "mean")
    np.testing.assert_allclose(dx, np.broadcast_to(dy[:, None, :] / 3, x.shape), rtol=1e-12)
    (dx,) = einc.backward(dy, "reduce", x, "a b c -> a c", "max")
    expected = np.where(x == x.max(axis=1, keepdims=True), dy[:, None, :], 0.0)  # no ties in random values
    np.testing.assert_allclose(dx, expected, rtol=1e-12)


def test_a_repeats_gradient_sums_the_copies():
    x, dy = random(3), random(3, 4)
    (dx,) = einc.backward(dy, "repeat", x, "a -> a r", r=4)
    np.testing.assert_allclose(dx, dy.sum(axis=1), rtol=1e-12)


def test_unpacks_gradient_is_a_pack():
    packed = random(2, 7)
    d1, d2 = random(2, 3), random(2, 2, 2)
    (dpacked,) = einc.backward([d1, d2], "unpack", packed, [(3,), (2, 2)], "b *")
    np.testing.assert_array_equal(dpacked, np.concatenate([d1, d2.reshape(2, 4)], axis=1))


def test_a_call_without_a_gradient_is_an_einc_error():
    with pytest.raises(einc.EincError):
        einc.backward(np.ones(2, dtype=bool), "reduce", np.ones((2, 3), dtype=bool), "a b -> a", "any")
