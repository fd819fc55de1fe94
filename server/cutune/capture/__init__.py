"""Launch capture: the problems a real program runs, recorded on the GPU, become the kernels' tuning specs.

`inject/` runs inside the user's program (loaded by file, never through this package); the rest runs in cutune.
"""

from cutune.capture.log import CaptureError, CaptureLog, read_log
from cutune.capture.run import CaptureRun, SpecOutcome, capture, specs_from_log

__all__ = ["CaptureError", "CaptureLog", "CaptureRun", "SpecOutcome", "capture", "read_log", "specs_from_log"]
