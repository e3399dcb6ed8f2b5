"""einops' own test files, taken unchanged from the installed einops package, run against einc through
einops_shim.py (einc behind einops' functions) on numpy. Every test that fails is one of the differences
docs/python.md documents; a difference fixed, or a new one, fails this test until the list is updated."""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("einops.tests", reason="einops' test files come with einops: pip install einops")
einc = pytest.importorskip("einc", reason="the einc module is not built (pip install nanobind, then build)")

# Test name -> the difference (docs/python.md, "Differences from einops").
DOCUMENTED_DIFFERENCES = {
    "test_einsum.py::test_functional_errors": "einsum takes () singleton axes, which einops refuses",
    "test_ops.py::test_reduction_with_callable_imperatives": "reductions by name only, not callables",
}


def test_einops_test_files_pass_but_for_the_documented_differences():
    here = os.path.dirname(os.path.abspath(__file__))
    environment = dict(os.environ, EINOPS_TEST_BACKENDS="numpy")
    environment["PYTHONPATH"] = os.pathsep.join([here, os.path.dirname(einc.__file__), environment.get("PYTHONPATH", "")])
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-p", "einops_shim", "--pyargs",
         "einops.tests"],
        env=environment, capture_output=True, text=True, timeout=600)
    # (pytest names a failed test by a path relative to its root directory, which may hold einops or not)
    failed = set(re.findall(r"^FAILED (?:\S*/)?(test_\w+\.py::\S+?)(?: - .*)?$", run.stdout, re.MULTILINE))
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) > 0, run.stdout[-3000:]
    assert failed == set(DOCUMENTED_DIFFERENCES), run.stdout[-3000:]
