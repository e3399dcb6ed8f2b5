"""einc on PyTorch tensors (through DLPack), against einops on the same tensors. Skipped, saying so, where
torch is not installed; the CUDA tests where no GPU is visible to torch."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the PyTorch tests need it")
einops = pytest.importorskip("einops", reason="einops is the reference: pip install einops")
einc = pytest.importorskip("einc", reason="the einc module is not built (pip install nanobind, then build)")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_a_permutation_is_a_view_of_the_tensor(device):
    x = torch.arange(24, dtype=torch.float32, device=device).reshape(2, 3, 4)
    y = einc.rearrange(x, "a b c -> c a b")
    assert isinstance(y, torch.Tensor) and y.device == x.device
    assert y.data_ptr() == x.data_ptr()
    assert torch.equal(y, einops.rearrange(x, "a b c -> c a b"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_calls_match_einops(device, dtype):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, 8, generator=generator, dtype=torch.float64).to(dtype=dtype, device=device)
    w = torch.randn(8, 5, generator=generator, dtype=torch.float64).to(dtype=dtype, device=device)
    tolerance = {torch.float64: 1e-10, torch.float32: 1e-4}.get(dtype, 3e-2)
    pairs = [
        (einc.rearrange(x, "b (h w) c -> b h (w c)", h=2), einops.rearrange(x, "b (h w) c -> b h (w c)", h=2)),
        (einc.reduce(x, "b s c -> b c", "mean"), einops.reduce(x, "b s c -> b c", "mean")),
        (einc.repeat(w, "c k -> r c k", r=3), einops.repeat(w, "c k -> r c k", r=3)),
        (einc.einsum(x, w, "b s c, c k -> b s k"), einops.einsum(x, w, "b s c, c k -> b s k")),
    ]
    for ours, theirs in pairs:
        assert isinstance(ours, torch.Tensor) and ours.dtype == theirs.dtype and ours.device == theirs.device
        torch.testing.assert_close(ours, theirs, rtol=tolerance, atol=tolerance)


def test_a_list_of_tensors_is_stacked():
    xs = [torch.full((2, 3), float(i)) for i in range(3)]
    assert torch.equal(einc.rearrange(xs, "n a b -> a n b"), einops.rearrange(xs, "n a b -> a n b"))
