"""einc's calls on torch tensors that require grad, recorded by torch.autograd.

torch exports no tensor that requires grad through __dlpack__, so the einc module hands such a call here
(record). The call runs on detached tensors inside a torch.autograd.Function whose backward is einc's
gradient program (einc.backward): torch.autograd.gradcheck passes for every op in f64 (and c128:
its gradients are torch's, dL/d(re) + i dL/d(im)). Calls made under
torch.no_grad() run on the detached tensors and record nothing.
"""

import torch

import einc


def _arguments(op, tensors, rest):
    """The positional arguments of einc.<op>, with `tensors` in their places and `rest` after them."""
    if op == "einsum":
        return (*tensors, *rest)
    if op == "pack":
        return (list(tensors), *rest)
    return (tensors[0], *rest)


class _Call(torch.autograd.Function):
    """One einc call: forward runs it, backward runs its gradient program."""

    @staticmethod
    def forward(ctx, op, rest, axes_lengths, *tensors):
        outputs = getattr(einc, op)(*_arguments(op, [t.detach() for t in tensors], rest), **axes_lengths)
        ctx.call = (op, rest, axes_lengths)
        ctx.save_for_backward(*tensors)
        if op == "unpack":
            outputs = tuple(outputs)
        results = outputs[:1] if op == "pack" else outputs if op == "unpack" else (outputs,)
        ctx.outputs = [(result.shape, result.dtype, result.device) for result in results]
        ctx.mark_non_differentiable(*[result for result in results
                                      if not (result.dtype.is_floating_point or result.dtype.is_complex)])
        return outputs

    @staticmethod
    def backward(ctx, *output_gradients):
        op, rest, axes_lengths = ctx.call
        tensors = [tensor.detach() for tensor in ctx.saved_tensors]
        # (an output no gradient reached, such as an unused part of unpack, contributes zeros; einc's
        # gradient program is not itself recorded: no double backward)
        gradients = [
            gradient.detach() if gradient is not None else torch.zeros(shape, dtype=dtype, device=device)
            for gradient, (shape, dtype, device) in zip(output_gradients, ctx.outputs)
        ]
        inputs = einc.backward(gradients if op == "unpack" else gradients[0], op,
                               *_arguments(op, tensors, rest), **axes_lengths)
        return (None, None, None, *inputs)


def record(op, *args, **axes_lengths):
    """einc.<op>(*args, **axes_lengths) on tensors of which one or more require grad."""
    if op == "einsum":
        tensors, rest = args[:-1], args[-1:]
    elif op == "pack" or not isinstance(args[0], (list, tuple)):
        tensors, rest = (args[0] if op == "pack" else [args[0]]), args[1:]
    else:  # a list, which rearrange, reduce and repeat stack into one tensor: torch.stack records that
        tensors, rest = [torch.stack(list(args[0]))], args[1:]
    if not torch.is_grad_enabled():
        return getattr(einc, op)(*_arguments(op, [t.detach() for t in tensors], rest), **axes_lengths)
    outputs = _Call.apply(op, rest, axes_lengths, *tensors)
    return list(outputs) if op == "unpack" else outputs
