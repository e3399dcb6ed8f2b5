"""einc on JAX arrays (through DLPack), against einops on the same arrays. Skipped, saying so, where jax is
not installed."""

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed: the JAX tests need it")
jnp = pytest.importorskip("jax.numpy")
einops = pytest.importorskip("einops", reason="einops is the reference: pip install einops")
einc = pytest.importorskip("einc", reason="the einc module is not built (pip install nanobind, then build)")


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int32, jnp.uint8])
def test_calls_match_einops_and_return_jax_arrays(dtype):
    x = jnp.arange(2 * 6 * 4).reshape(2, 6, 4).astype(dtype)
    w = jnp.arange(4 * 3).reshape(4, 3).astype(dtype)
    pairs = [
        (einc.rearrange(x, "b (h w) c -> b h (w c)", h=2), einops.rearrange(x, "b (h w) c -> b h (w c)", h=2)),
        (einc.rearrange(x, "b s c -> c b s"), einops.rearrange(x, "b s c -> c b s")),  # a view on the CPU
        (einc.reduce(x, "b s c -> b c", "max"), einops.reduce(x, "b s c -> b c", "max")),
        (einc.repeat(w, "c k -> r c k", r=3), einops.repeat(w, "c k -> r c k", r=3)),
        (einc.einsum(x, w, "b s c, c k -> b s k"), einops.einsum(x, w, "b s c, c k -> b s k")),
    ]
    for ours, theirs in pairs:
        assert isinstance(ours, jax.Array) and ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64),
                                   rtol=1e-2 if dtype == jnp.bfloat16 else 0)
