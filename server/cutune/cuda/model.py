"""The source model: what a `.cu` file holds that cutune can tune (plain data, no parsing here)."""

from __future__ import annotations

import difflib
import enum
import functools
from dataclasses import dataclass, field
from typing import Protocol

from cutune.cuda.text import Span


@dataclass(frozen=True, slots=True)
class Parameter:
    """A function parameter: its declared type text and name."""

    name: str
    type: str
    span: Span


class TemplateParamKind(enum.Enum):
    TYPE = "type"  # typename T / class T
    VALUE = "value"  # int N, bool B, ...


@dataclass(frozen=True, slots=True)
class TemplateParam:
    """A template parameter of a kernel; `type` is empty for type parameters."""

    kind: TemplateParamKind
    name: str
    type: str
    default: str | None
    span: Span


@dataclass(frozen=True, slots=True)
class LaunchBounds:
    """`__launch_bounds__(max_threads[, min_blocks[, max_cluster]])` as written."""

    max_threads: str
    min_blocks: str | None
    max_cluster: str | None
    span: Span


@dataclass(frozen=True, slots=True)
class Kernel:
    """A `__global__` function definition."""

    name: str
    params: tuple[Parameter, ...]
    template_params: tuple[TemplateParam, ...]
    launch_bounds: LaunchBounds | None
    span: Span  # whole definition, including a leading `template <...>` line
    name_span: Span
    body_span: Span  # the `{ ... }` compound statement
    template_span: Span | None  # the `template <...>` parameter list, when present
    extern_c: bool = False
    has_errors: bool = False  # tree-sitter reported error nodes inside the definition
    namespace: str = ""  # enclosing namespaces, e.g. "serving" or "a::b"; "" at file scope

    @property
    def qualified_name(self) -> str:
        """The name with its namespaces, e.g. 'serving::silu_and_mul_kernel'."""
        return f"{self.namespace}::{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class DeviceFunction:
    """A `__device__` (or `__host__ __device__`) function, or a device-side helper template."""

    name: str
    span: Span
    namespace: str = ""


class Access(enum.Flag):
    """How a kernel uses a pointer argument's elements."""

    NONE = 0
    READ = enum.auto()
    WRITE = enum.auto()


@dataclass(frozen=True, slots=True)
class LaunchSite:
    """A launch `kernel<targs><<<grid, block, smem, stream>>>(args)` in host code, or of a local set to the kernel
    (`through`)."""

    kernel: str
    template_args: tuple[str, ...]
    grid: str
    block: str
    shared_mem: str | None
    stream: str | None
    args: tuple[str, ...]
    span: Span
    config_spans: tuple[Span, ...]  # spans of grid, block[, smem[, stream]] expressions
    template_arg_spans: tuple[Span, ...]
    host_function: str | None
    macro: str | None = None  # the `#define` whose body holds the launch, when it is written in one
    # the local the launch calls the kernel through (`auto kernel = &k<T>; kernel<<<...>>>(...)`), whose
    # initializer holds the template arguments
    through: str | None = None


@dataclass(frozen=True, slots=True)
class LaunchExtent:
    """Where a launch is written: its bytes and (zero-based) lines, and the kernel it launches."""

    start_byte: int
    end_byte: int
    first_line: int
    last_line: int
    kernel: str


class LiteralKind(enum.Enum):
    DEFINE = "define"  # #define NAME 256
    CONSTEXPR = "constexpr"  # constexpr int kThreads = 256;
    TEMPLATE_ARG = "template_arg"  # kernel<float, 256><<<...>>> (an int template argument at a launch)
    PRAGMA_UNROLL = "pragma_unroll"  # #pragma unroll 4
    LAUNCH_DIM = "launch_dim"  # <<<grid, 256>>> or dim3 block(256) used at a launch
    VECTOR_WIDTH = "vector_width"  # 16 / sizeof(T)
    LAUNCH_BOUNDS = "launch_bounds"  # __launch_bounds__(256, 2)


@dataclass(frozen=True, slots=True)
class TunableLiteral:
    """An integer literal that encodes a hidden tuning choice, with where it is written."""

    kind: LiteralKind
    name: str | None  # the macro/constexpr/template-parameter name, when it has one
    value: int
    span: Span  # the literal itself (what a rewrite would replace)
    kernel: str | None  # the kernel it belongs to or feeds, when known


@dataclass(frozen=True, slots=True)
class Macro:
    """A `#define` (object- or function-like) at file scope."""

    name: str
    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class TypeDecl:
    """A struct/class/union/enum/typedef/using declaration at file or namespace scope."""

    name: str
    span: Span
    namespace: str = ""


@dataclass(frozen=True, slots=True)
class Include:
    """An `#include` line; `system` for `<...>`."""

    target: str
    system: bool
    span: Span


@dataclass(frozen=True, slots=True)
class ParseIssue:
    """A region tree-sitter could not parse; the model skips it and keeps going."""

    message: str
    span: Span


_LISTED_KERNELS = 10  # an unknown kernel's error lists every kernel of a file with at most this many


class SourceFacts(Protocol):
    """What a parser finds in one text, each part built when first asked for (see `SourceModel`)."""

    def kernels(self) -> tuple[Kernel, ...]: ...
    def kernel(self, name: str) -> Kernel | None: ...
    def device_functions(self) -> tuple[DeviceFunction, ...]: ...
    def launches(self, kernel: str | None = None) -> tuple[LaunchSite, ...]: ...
    def launch_configs(self) -> tuple[tuple[int, int, int], ...]: ...
    def launch_extents(self) -> tuple[LaunchExtent, ...]: ...
    def literals(self, kernel: str | None = None) -> tuple[TunableLiteral, ...]: ...
    def macros(self) -> tuple[Macro, ...]: ...
    def types(self) -> tuple[TypeDecl, ...]: ...
    def includes(self) -> tuple[Include, ...]: ...
    def issues(self) -> tuple[ParseIssue, ...]: ...


@dataclass(frozen=True)
class SourceModel:
    """Everything cutune knows about one `.cu`/`.cuh` text.

    Each part is built the first time it is read, then kept: on a file of thousands of kernels, looking at
    one kernel (its definition, launches) costs that kernel, not the file."""

    path: str | None
    text: str
    facts: SourceFacts = field(repr=False, compare=False)

    @functools.cached_property
    def kernels(self) -> tuple[Kernel, ...]:
        """The `__global__` definitions, in source order."""
        return self.facts.kernels()

    @functools.cached_property
    def device_functions(self) -> tuple[DeviceFunction, ...]:
        """The `__device__` functions, in source order."""
        return self.facts.device_functions()

    @functools.cached_property
    def launches(self) -> tuple[LaunchSite, ...]:
        """Every launch site, in source order."""
        return self.facts.launches()

    @functools.cached_property
    def launch_configs(self) -> tuple[tuple[int, int, int], ...]:
        """Each launch's `<<<...>>>` expressions as (start byte, end byte, slot: 0 grid, 1 block, 2 smem, 3 stream),
        without building the launch sites."""
        return self.facts.launch_configs()

    @functools.cached_property
    def launch_extents(self) -> tuple[LaunchExtent, ...]:
        """Where each launch is and which kernel it launches, without building the launch sites."""
        return self.facts.launch_extents()

    @functools.cached_property
    def literals(self) -> tuple[TunableLiteral, ...]:
        """Every tunable literal, one per source position, in source order."""
        return self.facts.literals()

    @functools.cached_property
    def macros(self) -> tuple[Macro, ...]:
        """The `#define`s at file scope."""
        return self.facts.macros()

    @functools.cached_property
    def types(self) -> tuple[TypeDecl, ...]:
        """The types declared at file or namespace scope."""
        return self.facts.types()

    @functools.cached_property
    def includes(self) -> tuple[Include, ...]:
        """The `#include` lines."""
        return self.facts.includes()

    @functools.cached_property
    def issues(self) -> tuple[ParseIssue, ...]:
        """The regions tree-sitter could not parse."""
        return self.facts.issues()

    def kernel(self, name: str) -> Kernel:
        """The kernel called `name`; raises SourceError listing the kernels when absent."""
        from cutune.errors import SourceError

        found = (
            next((k for k in self.kernels if k.name == name), None)
            if "kernels" in self.__dict__
            else self.facts.kernel(name)
        )
        if found is not None:
            return found
        names = [k.name for k in self.kernels]
        if len(names) <= _LISTED_KERNELS:
            hint = f"kernels here: {', '.join(names) or 'none'}"
        else:  # a file of thousands of kernels: the few closest names, not all
            close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
            guess = f"did you mean {' or '.join(close)}? " if close else ""
            hint = f"{guess}{len(names)} kernels here; `cutune kernels FILE` lists them"
        raise SourceError(f"no __global__ kernel named {name!r} ({hint})", path=self.path)

    def launches_of(self, name: str) -> tuple[LaunchSite, ...]:
        """The launch sites of one kernel."""
        if "launches" in self.__dict__:
            return tuple(s for s in self.launches if s.kernel == name)
        return self.facts.launches(name)

    def literals_of(self, name: str) -> tuple[TunableLiteral, ...]:
        """The tunable literals that belong to or feed one kernel."""
        if "literals" in self.__dict__:
            return tuple(lit for lit in self.literals if lit.kernel == name)
        return self.facts.literals(name)
