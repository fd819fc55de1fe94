"""Starts `cutune capture`'s launch recorder in a Python program (this folder is put first on PYTHONPATH).

Python imports only the first `sitecustomize` on its path: the one this shadows (a distribution's, a
virtual environment's) is imported afterwards, so the program runs as it would without capture.
"""

import contextlib
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("cutune_intercept", os.path.join(_here, "cutune_intercept.py"))
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    _module.start()

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules["sitecustomize"]
with contextlib.suppress(ImportError):
    import sitecustomize  # type: ignore[import-not-found]  # noqa: F401  (the shadowed one, if any)
