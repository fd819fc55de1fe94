"""Autotune in the editor searches the structural variants too (setting `cutune.variants`, default on, as on the
command line), stores them with the study, and its result's Apply writes the winning variant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cutune.gpu.backend import Measurement, Timing
from cutune.gpu.replay import header_for
from cutune.limits import limits_for
from cutune.project import build_job, open_kernel
from cutune.template.variants import VARIANT
from cutune.template.variants.store import ATTR
from cutune.tune.space import feasible_configs
from cutune.tune.study import load_study
from cutune.workflow import variants_of, with_combined
from tests.lsp.editor import Editor, copy_workspace
from tests.lsp.synthetic import DEVICE, NOTE

pytestmark = pytest.mark.asyncio(loop_scope="module")

RECORDING = "add.recording.jsonl"
SETTINGS = {"backend": "replay", "replayFile": RECORDING, "budget": {"trials": 250, "seconds": 60}}
SPEC = """
[kernel.add_kernel]
grid = "1024"
block = "BLOCK_THREADS"
sizes = [{ n = 1048576 }, { n = 16777216 }]
args = [
  { name = "out", dtype = "float32", role = "out", shape = ["n"] },
  { name = "x", dtype = "float32", role = "in", shape = ["n"] },
  { name = "y", dtype = "float32", role = "in", shape = ["n"] },
  { name = "n", dtype = "int32", value = "n" },
]

[kernel.add_kernel.params.BLOCK_THREADS]
values = [256]  # one value: the combined space (248,832 points) is listed variant by variant: 223 feasible
default = 256
binding = "launch"
"""


def _workspace(tmp_path: Path) -> Path:
    """The autotune workspace with a spec for add_kernel and a TEST-ONLY synthetic recording of its combined
    space (the variant `packs_per_thread` made 30% faster by a formula; nothing was measured)."""
    root = copy_workspace("autotune", tmp_path)
    with (root / "scale.tune.toml").open("a", encoding="utf-8") as f:
        f.write(SPEC)
    ctx = open_kernel(root / "scale.cu", "add_kernel")
    combined = variants_of(ctx)
    job = build_job(with_combined(ctx, combined))
    faster = 1 + [v.name for v in combined.variants].index("packs_per_thread")
    lines = [{**header_for(job, DEVICE), "note": NOTE}]
    for config in feasible_configs(job.space, job.spec, limits_for("sm_90"), budget=job.space.size()) or ():
        factor = 0.7 if config[VARIANT] == faster else 1.0
        timings = tuple(Timing(dict(s), 10.0 * factor, 9.95 * factor, 10.05 * factor, 100) for s in job.spec.sizes)
        lines.append({"type": "measurement", **Measurement(config, timings=timings).to_dict()})
    (root / RECORDING).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return root


async def test_autotune_searches_and_stores_the_variants(editor: Editor, tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    editor.use(root)
    await editor.configure(SETTINGS)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    await editor.command("cutune.autotune", uri, "add_kernel")
    await editor.wait(lambda: editor.finished("add_kernel") is not None)
    status = editor.finished("add_kernel")
    assert status is not None and status["state"] == "done", status
    assert status["best"] == pytest.approx(1 / 0.7, rel=0.02)
    result = json.loads((root / ".cutune" / "results" / "scale.add_kernel.json").read_text())
    assert result["best"][VARIANT] != 0 and VARIANT in result["original"]
    searched = [v.name for v in variants_of(open_kernel(root / "scale.cu", "add_kernel")).variants]
    # Apply: the result is current (its kernel is the combined one), and the winner is written as the body
    await editor.wait(lambda: any(d.code == "tuned" for d in editor.published[uri][-1]))
    assert await editor.command("cutune.apply", uri, "add_kernel") == {"applied": True}
    text = editor.text(uri)
    assert "// cutune: variant packs_per_thread" in text and "VARIANT" not in text
    study = load_study(f"journal:{root / '.cutune' / 'studies.journal'}", result["study"])
    assert (
        [v["name"] for v in study.user_attrs[ATTR]] == searched == ["vectorized", "packs_per_thread", "persistent_grid"]
    )


async def test_the_setting_turns_them_off(editor: Editor, tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    editor.use(root)
    await editor.configure({**SETTINGS, "variants": False})
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    await editor.command("cutune.autotune", uri, "add_kernel")
    await editor.wait(lambda: editor.finished("add_kernel") is not None)
    status = editor.finished("add_kernel")
    # without variants the job's space is not the recording's: replay refuses and says why
    assert status is not None and status["state"] == "failed" and "tuning space differs" in status["message"]
