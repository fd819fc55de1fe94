"""Kernel names as C++ writes them: demangling (cu++filt or c++filt) and splitting off template arguments."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from cutune.cuda.lists import split_top_level

_CAST = re.compile(r"^\((?:unsigned |signed )?(?:char|short|int|long|long long|bool)\)(-?\d+)$")
_INTEGER = re.compile(r"^(-?\d+)(?:u|l|ul|ll|ull)?$", re.IGNORECASE)
_ANONYMOUS = "(anonymous namespace)::"


@dataclass(frozen=True)
class KernelName:
    """A demangled kernel name: `ns::kernel` and its template arguments as written (`c10::BFloat16`, `256`)."""

    qualified: str
    template_args: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.qualified.rsplit("::", 1)[-1]

    @property
    def namespace(self) -> str:
        return self.qualified.rsplit("::", 1)[0] if "::" in self.qualified else ""


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Each mangled name's demangled form (names that are not mangled, e.g. extern "C" kernels, stay)."""
    wanted = sorted({n for n in names if n.startswith("_Z")})
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    out = {n: n for n in names}
    if not wanted or tool is None:
        return out
    done = subprocess.run([tool], input="\n".join(wanted) + "\n", capture_output=True, text=True, check=False)
    lines = done.stdout.splitlines()
    if done.returncode == 0 and len(lines) == len(wanted):
        out.update(zip(wanted, lines, strict=True))
    return out


def kernel_name(demangled: str) -> KernelName:
    """`void ns::k<float, 256>(float*, int)` → KernelName("ns::k", ("float", "256"))."""
    text = demangled.strip()
    if text.startswith("void "):
        text = text[len("void ") :]
    text = text.replace(_ANONYMOUS, "")
    depth, end = 0, len(text)
    for i, ch in enumerate(text):  # the name ends at the first top-level `<` or `(`
        if ch in "<(" and depth == 0:
            end = i
            break
    qualified = text[:end].strip()
    args: tuple[str, ...] = ()
    if end < len(text) and text[end] == "<":
        close = _matching(text, end)
        args = tuple(template_value(a) for a in _parts(text[end + 1 : close]))
    return KernelName(qualified, args)


def template_value(text: str) -> str:
    """A demangled template argument as source would write it: `(int)4` → `4`, `256u` → `256`, a function
    `&(float ns::silu<float>(float const&))` → `ns::silu<float>`."""
    text = text.strip()
    if m := _CAST.match(text):
        return m.group(1)
    if m := _INTEGER.match(text):
        return m.group(1)
    if text.startswith("&(") and text.endswith("))"):
        return _function_name(text[2:-1])
    return text


def _function_name(signature: str) -> str:
    """`float ns::silu<float>(float const&)` → `ns::silu<float>`: the name between the return type and the
    parameter list (both may hold spaces and templates)."""
    depth, params = 0, len(signature)
    for i in range(len(signature) - 1, -1, -1):  # the parameter list is the last top-level parentheses
        depth += {")": 1, "(": -1}.get(signature[i], 0)
        if depth == 0 and signature[i] == "(":
            params = i
            break
    head, depth = signature[:params], 0
    for i in range(len(head) - 1, -1, -1):
        depth += {">": 1, "<": -1}.get(head[i], 0)
        if depth == 0 and head[i] == " ":
            return head[i + 1 :]
    return head


def _matching(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return len(text)


def _parts(text: str) -> list[str]:
    return [p.strip() for p in split_top_level(text, "()<>") if p.strip()]
