"""`cutune capture`: run a program with the launch recorder, keep its log, and write the specs it implies."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cutune.capture.log import CaptureError, CaptureLog, merge_parts, write_log
from cutune.capture.match import Captured, matched_launches, workspace_kernels
from cutune.capture.spec import KernelCapture, spec_from_captures
from cutune.errors import CutuneError, NoGpuError
from cutune.limits import limits_for
from cutune.source_file import text_hash
from cutune.spec import KernelSpec, dump_kernel_spec, load_spec, spec_path_for

STATE_DIR = ".cutune"  # the workspace's cutune folder (as `cutune.project.STATE_DIR`, without importing Optuna)
CAPTURE_DIR = Path(STATE_DIR) / "capture"
DATA_CAP = 64 << 20  # bytes kept of each input buffer per captured problem
INJECT_DIR = Path(__file__).parent / "inject"
NO_GPU = (
    "capture needs a CUDA GPU and the program's own environment (with `pip install cupti-python`): no CUDA GPU here"
)


@dataclass(frozen=True)
class CaptureRun:
    """What a capture run left: its log (also written to `log_path`) and the program's exit code."""

    log: CaptureLog
    log_path: Path
    returncode: int
    kernels: tuple[str, ...]  # the workspace kernels the recorder looked for


@dataclass(frozen=True)
class SpecOutcome:
    """The specs a capture log gave: one per captured kernel, the errors of the others, and notes."""

    kernels: tuple[KernelCapture, ...]
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def default_log(root: Path) -> Path:
    """Where a capture keeps its log unless told: the workspace's `.cutune/capture/launches.jsonl`."""
    return root / CAPTURE_DIR / "launches.jsonl"


def require_gpu() -> None:
    """Raise NoGpuError unless the CUDA driver loads and sees a device."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        raise NoGpuError(NO_GPU) from None
    count = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        raise NoGpuError(NO_GPU)


def capture(
    command: Sequence[str],
    root: Path,
    *,
    kernels: Sequence[str] = (),
    data: bool = False,
    log_path: Path | None = None,
    data_cap: int = DATA_CAP,
    cancel: threading.Event | None = None,
    output: Path | None = None,
    cwd: Path | None = None,
) -> CaptureRun:
    """Run `command` with the recorder in it; the log keeps what it launched even when it fails or is stopped.
    The program's output goes to `output` when given (a language server's stdout is its protocol), else to ours;
    it runs in `cwd` (default: ours)."""
    if not command:
        raise CaptureError("no program to run: give it after `--`, e.g. `cutune capture -- python bench.py`")
    found = workspace_kernels(root, kernels)
    missing = sorted(set(kernels) - set(found))
    if missing:
        raise CaptureError(f"no kernel named {', '.join(missing)} in the .cu files under {root}")
    if not found:
        raise CaptureError(
            f"no __global__ kernel in the .cu files under {root}: capture records the workspace's kernels"
        )
    require_gpu()
    folder = root / CAPTURE_DIR
    parts = folder / f"parts-{os.getpid()}-{int(time.time())}"
    parts.mkdir(parents=True, exist_ok=True)
    data_dir = folder / "data" if data else None
    env = dict(os.environ)
    if python_program(command):  # the recorder starts in every Python process the program runs
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(INJECT_DIR), env.get("PYTHONPATH", "")) if p)
    else:  # the driver loads the injection library, which runs the same recorder in an embedded Python
        env.update(injection_env(folder))
    env["CUTUNE_CAPTURE_OUT"] = str(parts / "launches")
    env["CUTUNE_CAPTURE_KERNELS"] = ",".join(sorted(found))
    env["CUTUNE_CAPTURE_DATA_CAP"] = str(data_cap)
    if data_dir is not None:
        env["CUTUNE_CAPTURE_DATA"] = str(data_dir)
    sink = output.open("wb") if output is not None else None
    try:
        proc = subprocess.Popen(
            list(command),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL if sink else None,
            stdout=sink,
            stderr=subprocess.STDOUT if sink else None,
        )
    except OSError as e:
        raise CaptureError(f"cannot run {command[0]!r}: {e.strerror or e}") from None
    finally:
        if sink is not None:
            sink.close()  # the child holds its own copy
    try:
        returncode = _wait(proc, cancel)
    finally:  # Ctrl-C or a cancel: the program stops, and what it launched is still kept
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
        found_parts = sorted(parts.glob("*.jsonl"))
        log = merge_parts(found_parts, command=command, data_dir=str(data_dir) if data_dir else None)
        target = log_path or default_log(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_log(target, log)
        shutil.rmtree(parts, ignore_errors=True)
    if not found_parts:
        raise CaptureError(
            f"the launch recorder never started in `{' '.join(command)}`: it starts in each Python process the "
            f"program runs, and in other programs when they initialise CUDA"
        )
    if log.failed and not log.launches:
        hint = " (pip install cupti-python in the program's environment)" if "cupti" in log.failed[0] else ""
        raise CaptureError(f"the launch recorder could not start in the program: {log.failed[0]}{hint}")
    return CaptureRun(log, target, proc.returncode if returncode is None else returncode, tuple(sorted(found)))


def python_program(command: Sequence[str]) -> bool:
    """Whether `command` runs Python: an interpreter, or a script whose `#!` line names one (pytest, torchrun)."""
    exe = shutil.which(command[0]) or command[0]
    if re.fullmatch(r"python[\d.]*", Path(exe).name):
        return True
    try:
        with open(exe, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def injection_env(folder: Path) -> dict[str, str]:
    """What a program that is not Python needs to be recorded: `CUDA_INJECTION64_PATH` naming the injection
    library (built here with the C compiler, once per version of its source) and the libpython it embeds."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise CaptureError("capture of a program that is not Python builds a small library: no C compiler (cc)")
    source = INJECT_DIR / "embed.c"
    library = folder / f"libcutune_inject.{text_hash(source.read_text(encoding='utf-8'))[:12]}.so"
    if not library.exists():
        folder.mkdir(parents=True, exist_ok=True)
        built = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"],
            capture_output=True,
            text=True,
            check=False,
        )
        if built.returncode != 0:
            raise CaptureError(f"cannot build the capture library: {built.stderr.strip()[-300:]}")
    libpython = shared_libpython()
    if libpython is None:
        raise CaptureError(
            f"capture of a program that is not Python embeds this Python ({sys.executable}), which has no shared "
            f"libpython; run cutune from a Python built with one"
        )
    return {
        "CUDA_INJECTION64_PATH": str(library),
        "CUTUNE_CAPTURE_LIBPYTHON": libpython,
        "CUTUNE_CAPTURE_INJECT_DIR": str(INJECT_DIR),
        # the embedded interpreter imports cupti-python from where this one does
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and Path(p).is_dir()),
    }


def shared_libpython() -> str | None:
    """This Python's shared library, where it has one."""
    names = [sysconfig.get_config_var(k) for k in ("INSTSONAME", "LDLIBRARY")]
    dirs = [sysconfig.get_config_var(k) for k in ("LIBDIR", "LIBPL")]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    dirs += [f"/usr/lib/{multiarch}"] if multiarch else []
    for folder in filter(None, dirs):
        for name in filter(None, names):
            path = Path(folder) / name
            if (name.endswith(".so") or ".so." in name) and path.exists():  # not the static `.a`
                return str(path)
    return None


def _wait(proc: subprocess.Popen[bytes], cancel: threading.Event | None) -> int | None:
    while True:
        try:
            return proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                return None


def specs_from_log(log: CaptureLog, root: Path, *, kernels: Sequence[str] = (), write: bool = True) -> SpecOutcome:
    """A spec for every workspace kernel the log saw, merged into (or written as) its `FILE.tune.toml`."""
    captured, notes = matched_launches(log, workspace_kernels(root, kernels))
    groups: dict[tuple[Path, str], list[Captured]] = {}
    for c in captured:
        groups.setdefault((c.path, c.kernel.name), []).append(c)
    limits = limits_for("sm_90").as_names()
    data_dir = Path(log.data_dir) if log.data_dir else None
    done, errors = [], []
    for (path, name), group in sorted(groups.items()):
        try:
            result = spec_from_captures(basis_spec(path, name), group, limits, data_dir)
            if write:
                write_spec(result, log)
            done.append(result)
        except CutuneError as e:
            errors.append(str(e))
    return SpecOutcome(tuple(done), tuple(errors), tuple(dict.fromkeys(notes)))


def basis_spec(path: Path, kernel: str) -> KernelSpec:
    """The kernel's table in its spec file, else the spec the drafter guesses (as `templatize` would)."""
    spec_path = spec_path_for(path)
    if spec_path.exists():
        spec_file = load_spec(spec_path)
        if kernel in spec_file.kernels:
            return spec_file.kernels[kernel]
    from cutune.project import open_kernel  # templatizing (and Optuna) only when a spec must be drafted

    return open_kernel(path, kernel).drafted_spec()


def write_spec(result: KernelCapture, log: CaptureLog) -> Path:
    """Merge the kernel's table into `FILE.tune.toml` (other kernels' tables untouched), and list the real
    inputs `--data` kept for it beside the capture log."""
    spec_path = spec_path_for(result.path)
    where = f" on {log.device}" if log.device else ""
    header = (
        f"# captured{where} {log.date}: sizes are the problems `{' '.join(log.command)}` launched, weights "
        f"their launch counts\n"
    )
    table = header + dump_kernel_spec(result.spec, spec_path.parent)
    old = spec_path.read_text(encoding="utf-8") if spec_path.exists() else None
    spec_path.write_text(merged_table(old, result.kernel, table), encoding="utf-8")
    if result.real_inputs and log.data_dir:  # beside the snapshots' folder
        manifest = Path(log.data_dir).parent / f"{result.path.stem}.{result.kernel}.inputs.json"
        manifest.parent.mkdir(parents=True, exist_ok=True)
        sizes = [
            {"size": dict(result.spec.sizes[i]), "inputs": inputs} for i, inputs in sorted(result.real_inputs.items())
        ]
        manifest.write_text(json.dumps({"spec": str(spec_path), "sizes": sizes}, indent=1) + "\n", encoding="utf-8")
    return spec_path


def merged_table(text: str | None, kernel: str, table: str) -> str:
    """`text` with the `[kernel.<kernel>]` table (and its sub-tables) replaced by `table`, or `table` added."""
    if not text:
        return table
    lines = text.splitlines(keepends=True)
    own = (f"[kernel.{kernel}]", f'[kernel."{kernel}"]')
    start = next((i for i, line in enumerate(lines) if line.strip() in own), None)
    if start is None:
        return text.rstrip("\n") + "\n\n" + table
    end = len(lines)
    for i in range(start + 1, len(lines)):
        head = lines[i].strip()
        if head.startswith("[") and not head.lstrip("[").startswith((f"kernel.{kernel}.", f'kernel."{kernel}".')):
            end = i
            break
    while start > 0 and lines[start - 1].startswith("# captured"):  # the header of an earlier capture goes too
        start -= 1
    while end > start + 1 and lines[end - 1].startswith("#") and end < len(lines):  # comments above the next table
        end -= 1
    return "".join(lines[:start]) + table + ("\n" + "".join(lines[end:]) if end < len(lines) else "")
