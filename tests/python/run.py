"""ctest's entry to the Python tests: pytest over this folder with the module of the build (PYTHONPATH),
or exit 77 - which ctest reports as skipped - naming what is missing."""

import importlib.util
import os
import sys

missing = [name for name in ("pytest", "numpy", "einops") if importlib.util.find_spec(name) is None]
if missing:
    print(f"skipped: {sys.executable} has no {', '.join(missing)} (pip install {' '.join(missing)})")
    sys.exit(77)

import pytest  # noqa: E402

sys.exit(pytest.main([os.path.dirname(os.path.abspath(__file__)), "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
