"""Where a GPU benchmark's report goes: OUT_DIR/<name>.<device>.<date>.json and .md."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any


def write_report(out: Path, name: str, report: dict[str, Any], markdown: str) -> None:
    """Write the report (with its `device` and `date`) as JSON and its markdown beside it, and print the markdown."""
    stem = f"{name}.{str(report.get('device', 'unknown')).replace(' ', '-')}.{report['date']}"
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / f"{stem}.md").write_text(markdown)
    print(markdown)


def new_report() -> dict[str, Any]:
    """An empty per-sample report of today on the current GPU (its `date`, `device` and `samples`)."""
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    return {"date": datetime.date.today().isoformat(), "device": name, "samples": {}}
