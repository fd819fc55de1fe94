"""Where the samples lie."""

from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[4] / "samples"
