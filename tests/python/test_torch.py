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


# Gradients: each call on tensors that require grad is recorded by a torch.autograd.Function whose
# backward is einc's gradient program; gradcheck compares it with finite differences in f64.
def f64(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).requires_grad_()


GRADIENT_CALLS = {
    "rearrange": (lambda x: einc.rearrange(x, "a b c -> c (a b)"), (2, 3, 4)),
    "rearrange a list": (lambda x: einc.rearrange([x, 2 * x], "n a b c -> a (n b) c"), (2, 3, 4)),
    "repeat": (lambda x: einc.repeat(x, "a b c -> a r b c", r=3), (2, 3, 4)),
    "einsum": (lambda x: einc.einsum(x, x[0], "a b c, b d -> a c d"), (2, 3, 4)),
    "pack": (lambda x: einc.pack([x, x[:, :2]], "a * c")[0], (2, 3, 4)),
    "unpack, one part unused": (lambda x: einc.unpack(x, [(1,), (2,)], "a * c")[1], (2, 3, 4)),
}
GRADIENT_CALLS.update({
    f"reduce {reduction}": ((lambda reduction: lambda x: einc.reduce(x, "a b c -> a c", reduction))(reduction),
                            (2, 3, 4))
    for reduction in ["sum", "mean", "max", "min", "prod"]
})


@pytest.mark.parametrize("name", GRADIENT_CALLS)
def test_gradcheck(name):
    call, shape = GRADIENT_CALLS[name]
    assert torch.autograd.gradcheck(call, (f64(*shape),))


# Complex: torch's convention (the gradient of a real loss is dL/d(re) + i dL/d(im); a product's is the
# output's gradient times the other factor's conjugate), which gradcheck checks for complex inputs.
COMPLEX_GRADIENT_CALLS = {
    "einsum": lambda z, w: einc.einsum(z, w, "a b c, b d -> a c d"),
    "einsum, elementwise": lambda z, w: einc.einsum(z, w[:, :1].expand(3, 4), "a b c, b c -> a b c"),
    "reduce mean": lambda z, w: einc.reduce(z, "a b c -> a c", "mean") * 2 + w.sum(),
    "rearrange": lambda z, w: einc.rearrange(z, "a b c -> c (a b)").sum() * w,
}


@pytest.mark.parametrize("name", COMPLEX_GRADIENT_CALLS)
def test_gradcheck_complex(name):
    generator = torch.Generator().manual_seed(3)
    z = torch.randn(2, 3, 4, generator=generator, dtype=torch.complex128).requires_grad_()
    w = torch.randn(3, 4, generator=generator, dtype=torch.complex128).requires_grad_()
    assert torch.autograd.gradcheck(COMPLEX_GRADIENT_CALLS[name], (z, w))


def test_gradients_reach_every_operand_that_requires_grad():
    x, w, bias = f64(4, 3), f64(3, 5, seed=1), torch.randn(5, dtype=torch.float64)  # bias: no grad
    y = einc.einsum(x, w, bias, "i k, k j, j -> i j")
    torch.autograd.backward(y, torch.ones_like(y))
    expected = [t.detach().clone().requires_grad_() for t in (x, w)]
    torch.autograd.backward(torch.einsum("ik,kj,j->ij", *expected, bias), torch.ones(4, 5, dtype=torch.float64))
    torch.testing.assert_close(x.grad, expected[0].grad)
    torch.testing.assert_close(w.grad, expected[1].grad)
    assert bias.grad is None


def test_a_call_records_its_value_as_einops_computes_it():
    x = f64(2, 6, 4)
    y = einc.reduce(x, "b (h 2) c -> b h c", "max")
    assert y.grad_fn is not None and y.requires_grad
    torch.testing.assert_close(y, einops.reduce(x.detach(), "b (h 2) c -> b h c", "max"))


def test_boolean_results_and_no_grad_record_nothing():
    x = f64(2, 3)
    assert not einc.reduce(x, "a b -> a", "any").requires_grad
    with torch.no_grad():
        y = einc.rearrange(x, "a b -> b a")
    assert not y.requires_grad and torch.equal(y, x.detach().T)


def test_einc_backward_is_not_itself_recorded():
    x = f64(2, 3)
    y = einc.reduce(x, "a b -> a", "sum")
    (gradient,) = torch.autograd.grad(y, x, torch.ones(2, dtype=torch.float64, requires_grad=True),
                                      create_graph=True)
    assert not gradient.requires_grad  # einc's backward is not itself recorded


def test_tensors_are_read_from_their_attributes_with_any_strides_and_dtype():
    x = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    for tensor in (x.transpose(0, 2), x[:, ::2], x[1:, 1:, 2:], torch.arange(24, dtype=torch.uint8).reshape(2, 12),
                   x.to(torch.int16), x > 30):
        pattern = "a b c -> c a b" if tensor.dim() == 3 else "a b -> b a"
        assert torch.equal(einc.rearrange(tensor, pattern), einops.rearrange(tensor, pattern))
        assert torch.equal(einc.reduce(tensor, pattern.replace(" -> c a b", " -> a").replace(" -> b a", " -> a"),
                                       "max"),
                           einops.reduce(tensor, pattern.replace(" -> c a b", " -> a").replace(" -> b a", " -> a"),
                                         "max"))


def test_a_view_is_torch_s_own_view():
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)[:, 1:]
    y = einc.rearrange(x, "a b c -> c (a b)")  # not one stride: a copy
    z = einc.rearrange(x, "a b c -> c a b")
    assert z._base is x._base and z.data_ptr() == x.data_ptr() and torch.equal(z, x.permute(2, 0, 1))
    x.add_(1)  # in place on the input: the view sees it, the copy does not
    assert torch.equal(z, x.permute(2, 0, 1)) and not torch.equal(y, einops.rearrange(x, "a b c -> c (a b)"))


def test_what_einc_cannot_read_is_a_clear_error():
    with pytest.raises(einc.EincError, match="negation bit"):
        einc.rearrange(torch.ones(2, 3)._neg_view(), "a b -> b a")
    with pytest.raises(einc.EincError, match="float8_e4m3fnuz"):
        einc.rearrange(torch.ones(2, 3).to(torch.float8_e4m3fnuz), "a b -> b a")
    z = torch.randn(2, 3, dtype=torch.complex64)
    assert torch.equal(einc.rearrange(z, "a b -> b a"), z.T)
    torch.testing.assert_close(einc.einsum(z, z.T.conj().resolve_conj(), "a b, b c -> a c"), z @ z.T.conj())
    with pytest.raises(einc.EincError, match="conjugation bit"):  # its memory holds z, not conj(z)
        einc.einsum(z, z.T.conj(), "a b, b c -> a c")
    with pytest.raises(einc.EincError, match="strided"):
        einc.rearrange(torch.ones(2, 3).to_sparse(), "a b -> b a")
    with pytest.raises(einc.EincError, match="meta"):
        einc.rearrange(torch.ones(2, 3, device="meta"), "a b -> b a")
