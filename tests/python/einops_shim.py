"""einops' interface over einc, for running einops' own test files against einc: a pytest plugin that,
loaded before the tests are collected (`-p einops_shim`), replaces einops' functions with einc's and turns
einc.EincError into einops.EinopsError. Only the functions are replaced; einops' layers and internals stay
einops' own. Run by test_einops_suite.py:

    EINOPS_TEST_BACKENDS=numpy PYTHONPATH=build/python:tests/python python -m pytest -p einops_shim --pyargs einops.tests
"""

import functools

import einops
import einops.einops
import einops.packing

import einc


def as_einops_error(function):
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except einc.EincError as error:
            raise einops.EinopsError(str(error)) from error

    return call


REPLACED = {
    "rearrange": as_einops_error(einc.rearrange),
    "reduce": as_einops_error(einc.reduce),
    "repeat": as_einops_error(einc.repeat),
    "einsum": as_einops_error(einc.einsum),
    "parse_shape": as_einops_error(einc.parse_shape),
    "pack": as_einops_error(einc.pack),
    "unpack": as_einops_error(einc.unpack),
}

for name, function in REPLACED.items():
    for module in (einops, einops.einops, einops.packing):
        if hasattr(module, name):
            setattr(module, name, function)
