"""One kernel and the device code it needs, as a stand-alone compile unit for nvcc or NVRTC.

Real kernels live in files whose host code includes torch or other host-only headers. The unit keeps
only what the kernel needs, found by the identifiers it uses (transitively through device functions,
types, device variables and macros): namespaces are re-opened around what they held, so qualified
names stay valid, and preprocessor conditions are re-applied around what sat under them. Host
functions never come along. In doubt (an unqualified name several declarations share) all are kept.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from cutune.cuda.decls import Decl, DeclKind, collect_decls
from cutune.cuda.headers import Declared, declared_names, resolve_header
from cutune.cuda.includes import TORCH_PREFIXES, device_includes
from cutune.cuda.model import SourceModel
from cutune.cuda.stand_ins import MATH_MACROS, nvrtc_stand_ins
from cutune.cuda.syntax import captures, node_text, parse_tree
from cutune.cuda.text import LineIndex
from cutune.cuda.torch_types import torch_headers, torch_scalars
from cutune.source_file import text_hash

_IDENTIFIERS = "[(identifier) (type_identifier) (namespace_identifier) (preproc_arg)] @id"
_WORD = re.compile(r"[A-Za-z_]\w*")
_HOST_NAMESPACES = re.compile(r"\b(?:torch|at|c10|pybind11|py)\b")
_PROVIDERS = frozenset(
    (
        DeclKind.DEVICE_FUNCTION,
        DeclKind.FUNCTION_DECLARATION,
        DeclKind.TYPE,
        DeclKind.VARIABLE,
        DeclKind.MACRO,
    )
)

# Under NVRTC there is no host C++ library: the `std::` names real kernels use come from CCCL.
# Under nvcc the host headers declare them (and re-declaring std::numeric_limits there is an error).
_INTS = """\
#ifdef __CUDACC_RTC__
#include <cuda/std/cstdint>
#else
#include <cstdint>
#endif
"""
# The math classification functions come from CUDA's own (global) device math library and
# numeric_limits from CCCL's light <limits>: <cuda/std/cmath> and <cuda/std/type_traits> cost NVRTC
# close to a second per compile each (measured with NVRTC 13.0), so type traits come only when used.
_PRELUDE = """\
#ifdef __CUDACC_RTC__
#include <cuda/std/limits>
namespace std {
using ::isfinite;
using ::isinf;
using ::isnan;
using cuda::std::numeric_limits;
}  // namespace std
#else
#include <cmath>
#include <limits>
#endif
"""
# Every CCCL trait is reachable as `std::` (`std::enable_if_t` in a kernel's return type, `std::is_same_v`):
# qualified lookup in `std` sees the names declared there (the prelude's) first, then cuda::std's.
_TRAITS = """\
#ifdef __CUDACC_RTC__
#include <cuda/std/type_traits>
namespace std {
using namespace cuda::std;
}  // namespace std
#else
#include <type_traits>
#endif
"""
_TRAIT_NAMES = frozenset(
    """conditional conditional_t enable_if enable_if_t integral_constant bool_constant true_type false_type
    is_same is_same_v is_floating_point is_floating_point_v is_integral is_integral_v is_signed is_signed_v
    is_unsigned is_unsigned_v is_pointer is_pointer_v is_const is_const_v is_arithmetic is_arithmetic_v
    remove_cv remove_cv_t remove_const remove_const_t remove_reference remove_reference_t remove_pointer
    remove_pointer_t decay decay_t make_signed make_signed_t make_unsigned make_unsigned_t underlying_type
    underlying_type_t common_type common_type_t void_t is_void is_void_v is_pod is_pod_v is_trivial is_trivial_v
    is_trivially_copyable is_trivially_copyable_v is_standard_layout is_standard_layout_v is_base_of is_base_of_v
    is_convertible is_convertible_v is_class is_class_v is_enum is_enum_v is_array is_array_v is_reference
    is_reference_v is_empty is_empty_v alignment_of alignment_of_v""".split()  # noqa: SIM905
)
_UINT = "typedef unsigned int uint;\n"
# <float.h>'s limits, which real kernels take through a project header the unit may leave out; NVRTC has no
# <float.h> (and CCCL's <cuda/std/cfloat> defines none of them)
_FLOAT_LIMITS = """\
#if defined(__CUDACC_RTC__)
#ifndef FLT_MAX
#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define FLT_EPSILON 1.192092896e-07F
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-16
#endif
#else
#include <cfloat>
#endif
"""
_FLOAT_LIMIT_NAMES = frozenset(("FLT_MAX", "FLT_MIN", "FLT_EPSILON", "DBL_MAX", "DBL_MIN", "DBL_EPSILON"))
# what torch's headers (or a project header the unit leaves out) brought along: CUDA's half and bfloat16 types
_CUDA_TYPES = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
_CUDA_TYPE_NAMES = frozenset(
    ("half", "half2", "__half", "__half2", "nv_bfloat16", "nv_bfloat162", "__nv_bfloat16", "__nv_bfloat162")
)
# CUDA headers whose names kernels use through a project header the unit may leave out (both compilers have them)
_CUDA_HEADERS = {
    "cooperative_groups": "#include <cooperative_groups.h>\n",
    "__nv_fp8_e4m3": "#include <cuda_fp8.h>\n",
    "__nv_fp8_e5m2": "#include <cuda_fp8.h>\n",
}


@dataclass(frozen=True)
class CompileUnit:
    """A stand-alone source holding one kernel and what it needs, ready for nvcc or NVRTC."""

    source: str
    kernel: str  # the kernel's qualified name, e.g. "serving::silu_and_mul_kernel"
    name_expressions: tuple[str, ...]  # qualified instantiations, e.g. "ns::k<float, 128>"
    include_dirs: tuple[str, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    for_nvrtc: bool = False
    # (first line in the unit, first line in the original file, line count), zero-based
    line_map: tuple[tuple[int, int, int], ...] = ()
    notes: tuple[str, ...] = ()  # what extraction changed that a user should know (dropped headers, ...)
    undefines: tuple[str, ...] = ()  # macros a real build undefines (-U), e.g. torch's __CUDA_NO_HALF_OPERATORS__

    def source_line(self, unit_line: int) -> int | None:
        """The original file's line (zero-based) of a unit line, or None for generated lines."""
        i = bisect.bisect_right([m[0] for m in self.line_map], unit_line) - 1
        if i < 0:
            return None
        first, original, count = self.line_map[i]
        return original + unit_line - first if unit_line < first + count else None

    def options(self) -> tuple[str, ...]:
        """The -I, -D and -U options both nvcc and NVRTC take for this unit (folders absolute: nvcc runs
        elsewhere)."""
        return (
            tuple(f"-I{os.path.abspath(d)}" for d in self.include_dirs)
            + tuple(f"-D{name}={value}" if value else f"-D{name}" for name, value in self.defines)
            + tuple(f"-U{name}" for name in self.undefines)
        )


def kernel_hash(model: SourceModel, kernel: str) -> str:
    """SHA-256 of the device code one kernel compiles from: edits elsewhere in the file leave it unchanged."""
    unit = extract_kernel(model, kernel)
    code = "\n".join(line for line in unit.source.splitlines() if not line.startswith("// cutune:"))
    return text_hash(code)


def qualified_name(model: SourceModel, kernel: str) -> str:
    """The kernel's name with its namespaces, e.g. 'serving::silu_and_mul_kernel'."""
    return model.kernel(kernel).qualified_name


def extract_kernel(
    model: SourceModel,
    kernel: str,
    *,
    instantiations: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
    defines: Mapping[str, str] | None = None,
    for_nvrtc: bool = False,
    drop_includes: Collection[str] = (),
    substitute_includes: Mapping[str, str] | None = None,
) -> CompileUnit:
    """A compile unit holding `kernel` and the device code it needs; raises SourceError if absent.

    `instantiations` are name expressions such as `k<float, 128>` (the namespace is added when left
    out). For nvcc they are forced by taking their address in the unit; for NVRTC they are only
    returned as `name_expressions`, which NVRTC instantiates itself. `drop_includes` and
    `substitute_includes` name `#include` targets as written (a spec's `includes`): those go, these are
    replaced by their value.
    """
    qualified = qualified_name(model, kernel)
    data = model.text.encode("utf-8", errors="replace")
    decls = collect_decls(parse_tree(data).root_node, data)
    expressions = tuple(_qualify(e.strip(), kernel, qualified) for e in instantiations)
    # device functions passed as template arguments (`k<T, silu<T>>`) are needed too
    target = model.kernel(kernel).span.start_byte
    needed = _needed(decls, kernel, target, data, {w for e in expressions for w in _WORD.findall(e)})
    dirs = list(include_dirs)
    if model.path and os.path.dirname(os.path.abspath(model.path)) not in dirs:
        dirs.insert(0, os.path.dirname(os.path.abspath(model.path)))  # for the file's own `"..."` includes
    code_names = {n for d in needed if d.kind is not DeclKind.USING for n in _used_names(d, data)}
    code_names |= {w for e in expressions for w in _WORD.findall(e)}
    headers = _ProjectHeaders(dirs, code_names, drop_includes, substitute_includes or {})
    own = {n for d in decls if d.kind is not DeclKind.INCLUDE for n in (*d.names, *d.namespace)}
    quoted = [t for d in decls if (t := _quoted_target(d, data))]
    # a using-directive for a namespace only dropped headers declare goes with them
    needed = {d for d in needed if d.kind is not DeclKind.USING or _namespace_kept(d, data, own, headers, quoted)}
    names = code_names | {n for d in needed if d.kind is DeclKind.USING for n in _used_names(d, data)}
    scalars = torch_scalars(names, for_nvrtc=for_nvrtc)
    # torch, the CUDA host API and the standard library reached through a project header the unit keeps:
    # installed headers, or stand-ins
    through = headers.reached(quoted)
    reached = torch_headers(through.torch, for_nvrtc=for_nvrtc)
    host_dirs, host_notes = nvrtc_stand_ins(through.host_api, through.standard, for_nvrtc=for_nvrtc)

    writer = _Writer(LineIndex(data))
    writer.generated(f"// cutune: {qualified} from {model.path or '<source>'}, device code only\n")
    writer.generated(_INTS)  # cheap, and int64_t & co. are everywhere in real kernels
    if "std" in names:  # only where `std::` is used: headers are most of a small kernel's NVRTC time
        writer.generated(_PRELUDE)
        if names & _TRAIT_NAMES:
            writer.generated(_TRAITS)
    if names & {"INFINITY", "NAN"}:
        writer.generated(MATH_MACROS)
    if names & _FLOAT_LIMIT_NAMES:
        writer.generated(_FLOAT_LIMITS)
    if not any(d.kind is DeclKind.TYPE and "uint" in d.names for d in decls):
        writer.generated(_UINT)
    direct = any(d.kind is DeclKind.INCLUDE and _torch_include(d, data) for d in decls)
    if direct or scalars.prelude or reached.include_dirs or names & _CUDA_TYPE_NAMES:
        writer.generated(_CUDA_TYPES)  # what torch's headers supplied the device code
    writer.generated(scalars.prelude)
    writer.generated("".join(dict.fromkeys(h for name, h in _CUDA_HEADERS.items() if name in names)))
    for d in decls:
        if d.kind is DeclKind.INCLUDE:
            writer.includes(d, data, for_nvrtc=for_nvrtc, names=names, headers=headers)
        elif d in needed:
            writer.declaration(d, data)
    writer.close_namespaces()
    if not for_nvrtc and expressions:
        writer.generated("\n// cutune: taking each address forces nvcc to instantiate the kernel\n")
        for i, expr in enumerate(expressions):
            writer.generated(f"[[maybe_unused]] static auto* cutune_inst_{i} = &{expr};\n")

    return CompileUnit(
        source=writer.text(),
        kernel=qualified,
        name_expressions=expressions,
        include_dirs=tuple(dict.fromkeys((*host_dirs, *dirs, *scalars.include_dirs, *reached.include_dirs))),
        defines=tuple((defines or {}).items()),
        for_nvrtc=for_nvrtc,
        line_map=tuple(writer.line_map),
        notes=tuple(headers.notes) + scalars.notes + reached.notes + host_notes,
        undefines=reached.undefines,
    )


class _ProjectHeaders:
    """Decides which quoted includes the unit keeps: those that declare a name the kernel's code uses."""

    def __init__(
        self, search: list[str], names: set[str], drop: Collection[str], substitute: Mapping[str, str]
    ) -> None:
        self._search = search
        self._names = names
        self._drop = drop
        self._substitute = substitute
        self._declared: dict[str, Declared | None] = {}
        self.notes: list[str] = []

    def chosen(self, target: str) -> str | None:
        """What the spec makes of an include: None to drop it, another target, or `target` unchanged."""
        if target in self._drop:
            self._note(f'dropped #include "{target}": the spec\'s includes.drop')
            return None
        if target in self._substitute:
            self._note(f'#include "{target}" replaced by "{self._substitute[target]}": the spec\'s includes.substitute')
            return self._substitute[target]
        return target

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def declared(self, target: str) -> Declared | None:
        """What a quoted include declares; None when it is not found (then it is kept as written)."""
        if target not in self._declared:
            path = resolve_header(target, self._search)
            self._declared[target] = declared_names(path, self._search) if path is not None else None
        return self._declared[target]

    def reached(self, quoted: Sequence[str]) -> Declared:
        """The torch, CUDA host API and standard headers the kept ones of these quoted includes reach (spec rules
        applied), in a Declared without names."""
        found = [
            declared
            for written in quoted
            if (target := self.chosen(written)) is not None and (target != written or self.needed(target))
            if (declared := self.declared(target)) is not None
        ]
        return Declared(
            frozenset(),
            frozenset(),
            frozenset().union(*(d.torch for d in found)),
            frozenset().union(*(d.host_api for d in found)),
            frozenset().union(*(d.standard for d in found)),
        )

    def needed(self, target: str) -> bool:
        declared = self.declared(target)
        if declared is None or declared.names & self._names:
            return True
        self._note(f'dropped #include "{target}": the kernel uses nothing it declares')
        return False


def _namespace_kept(d: Decl, data: bytes, own: set[str], headers: _ProjectHeaders, quoted: list[str]) -> bool:
    """Whether a using-directive stays: its namespace is the file's own, a header the unit keeps declares
    it, or no project header does (a system header may)."""
    first = next(iter(_WORD.findall(node_text(data, d.item).removeprefix("using").replace("namespace", ""))), "")
    if not first or first in own:
        return True
    declaring = [t for t in quoted if (found := headers.declared(t)) is not None and first in found.namespaces]
    return not declaring or any(headers.needed(t) for t in declaring)


def _quoted_target(d: Decl, data: bytes) -> str:
    """The target of `#include "target"`; '' for anything else."""
    path = d.item.child_by_field_name("path") if d.kind is DeclKind.INCLUDE else None
    raw = node_text(data, path).strip() if path is not None else ""
    return raw.strip('"') if raw.startswith('"') else ""


def _torch_include(d: Decl, data: bytes) -> bool:
    path = d.item.child_by_field_name("path")
    return path is not None and node_text(data, path).strip().strip('<>"').startswith(TORCH_PREFIXES)


def _qualify(expr: str, kernel: str, qualified: str) -> str:
    """`k<float>` → `ns::k<float>` for a kernel in a namespace; qualified expressions stay."""
    if qualified != kernel and re.match(rf"{re.escape(kernel)}\b", expr):
        return qualified + expr[len(kernel) :]
    return expr


def _needed(decls: list[Decl], kernel: str, target: int, data: bytes, extra: set[str]) -> set[Decl]:
    """The kernel's definition (the one at byte `target`, with its alternatives under other preprocessor
    conditions) and, transitively, every device-side declaration whose name it (or the `extra` names) uses.

    Overloads of the kernel under the same conditions stay out: `&k<float>` must name one function (with
    several, nvcc "cannot deduce auto type")."""
    providers: dict[str, list[Decl]] = {}
    for d in decls:
        if (d.kind in _PROVIDERS and d.device) or (d.kind is DeclKind.HOST_FUNCTION and d.device):
            for name in d.names:
                providers.setdefault(name, []).append(d)
            if d.scope:  # `S::f` defined out of class comes with S
                providers.setdefault(d.scope.split("::")[-1].split("<")[0], []).append(d)
        elif d.kind is DeclKind.USING and not _HOST_NAMESPACES.search(node_text(data, d.item)):
            providers.setdefault("", []).append(d)  # using-directives come along unconditionally
    same = [d for d in decls if d.kind is DeclKind.KERNEL and d.name == kernel]
    own = next((d for d in same if d.start <= target < d.end), same[0] if same else None)
    todo = [d for d in same if d is own or (own is not None and d.conditions != own.conditions)]
    todo += providers.get("", [])
    todo += [p for name in extra for p in providers.get(name, ())]
    needed: set[Decl] = set()
    while todo:
        d = todo.pop()
        if d in needed:
            continue
        needed.add(d)
        for name in _used_names(d, data):
            todo.extend(p for p in providers.get(name, ()) if p not in needed)
    return needed


def _used_names(d: Decl, data: bytes) -> set[str]:
    """The identifiers a declaration mentions (in code, macro bodies and its #if conditions)."""
    names = {w for c in d.conditions for w in _WORD.findall(c)}
    for node in captures(_IDENTIFIERS, d.node).get("id", []):
        text = node_text(data, node)
        if node.type == "preproc_arg":
            names.update(_WORD.findall(text))
        else:
            names.add(text)
    return names


class _Writer:
    """Assembles the unit: namespaces re-opened as needed, conditions re-applied, lines mapped back."""

    def __init__(self, index: LineIndex) -> None:
        self._index = index
        self._parts: list[str] = []
        self._lines = 0
        self._namespace: tuple[str, ...] = ()
        self.line_map: list[tuple[int, int, int]] = []

    def text(self) -> str:
        return "".join(self._parts)

    def generated(self, text: str) -> None:
        self._parts.append(text)
        self._lines += text.count("\n")

    def _original(self, text: str, start: int) -> None:
        line = self._index.position(start).line
        self.line_map.append((self._lines, line, text.count("\n") + 1))
        self.generated(text + "\n")

    def _enter(self, namespace: tuple[str, ...]) -> None:
        common = 0
        while common < min(len(namespace), len(self._namespace)) and namespace[common] == self._namespace[common]:
            common += 1
        for name in reversed(self._namespace[common:]):
            self.generated(f"}}  // namespace {name}\n")
        for name in namespace[common:]:
            self.generated(f"namespace {name} {{\n" if name else "namespace {\n")
        self._namespace = namespace

    def close_namespaces(self) -> None:
        self._enter(())

    def _guarded(self, d: Decl, emit: list[tuple[str, int]]) -> None:
        if not emit:
            return
        if d.conditions:
            self.generated("#if " + " && ".join(f"({c})" for c in d.conditions) + "\n")
        for text, start in emit:
            if start >= 0:
                self._original(text, start)
            else:
                self.generated(text + "\n")
        if d.conditions:
            self.generated("#endif\n")

    def includes(self, d: Decl, data: bytes, *, for_nvrtc: bool, names: set[str], headers: _ProjectHeaders) -> None:
        path = d.item.child_by_field_name("path")
        if path is None:
            return
        raw = node_text(data, path).strip()
        written = raw.strip('<>"')
        target = headers.chosen(written)
        if target is None:
            return
        if target != written:  # the spec's substitute is kept as the user wrote it
            self._enter(d.namespace)
            self._guarded(d, [(f"#include <{target}>" if raw.startswith("<") else f'#include "{target}"', -1)])
            return
        if not raw.startswith("<") and not headers.needed(written):
            return
        targets = device_includes(written, raw.startswith("<"), for_nvrtc=for_nvrtc, names=names)
        original = [t for t in targets if t == written]
        self._enter(d.namespace)
        self._guarded(
            d,
            [(node_text(data, d.item).strip(), d.start)]
            if original and len(targets) == 1
            else [(f"#include <{t}>", -1) for t in targets],
        )

    def declaration(self, d: Decl, data: bytes) -> None:
        self._enter(d.namespace)
        text = data[d.start : d.end].decode("utf-8", errors="replace").rstrip()
        if d.in_extern_c_block:
            self._guarded(d, [('extern "C" {', -1), (text, d.start), ("}", -1)])
        else:
            self._guarded(d, [(text, d.start)])
