"""The import graph of the package, read with `ast` from every module: imports flow one way, the spec and the
templates know nothing of GPUs or tuning, and only the use-case layer assembles autotune."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "cutune"

# each top-level part of cutune, by layer: a module may import its own layer and those below it
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"cutune", "errors", "source_file", "limits"}),
    frozenset({"cuda"}),
    frozenset({"template", "spec"}),  # the spec builds on the template model; variants build on the spec
    frozenset({"gpu"}),
    frozenset({"tune"}),
    frozenset({"project", "check", "apply"}),
    frozenset({"agent", "capture"}),
    frozenset({"workflow"}),
    frozenset({"cli", "cli_render", "lsp", "__main__"}),
)
FRONT_ENDS = frozenset({"cli", "cli_render", "lsp", "__main__"})
# what assembling autotune takes; the front ends leave it to the workflow
CHAIN = {
    "cutune.tune": {"tune"},
    "cutune.tune.run": {"*"},
    "cutune.tune.parallel": {"tune_on_devices", "BackendRef"},
    "cutune.gpu.registry": {"*"},
    "cutune.agent.steps": {"run_loop"},
    "cutune.workflow.variants": {"store_variants", "searches_variants"},
    "cutune.template.variants": {"combine_all", "with_variants"},
    "cutune.project": {"build_job"},
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the module imported from
    names: tuple[str, ...]  # the names imported ("*" for `import x`)
    top_level: bool  # at module level and not only for type checking


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("cutune", *parts)).removesuffix(".__init__")


def _imports(path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = _module_name(path)
    top = set()
    for node in tree.body:  # module level, outside `if TYPE_CHECKING:`
        if isinstance(node, ast.Import | ast.ImportFrom):
            top.add(id(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield Import(module, node.module, tuple(a.name for a in node.names), id(node) in top)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, ("*",), id(node) in top)


IMPORTS = tuple(i for path in sorted(PACKAGE.rglob("*.py")) for i in _imports(path) if i.target.startswith("cutune"))


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _layer(module: str) -> int:
    return next(i for i, parts in enumerate(LAYERS) if _part(module) in parts)


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {_part(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert parts <= set().union(*LAYERS), parts - set().union(*LAYERS)


def test_imports_flow_one_way() -> None:
    upward = [f"{i.module} imports {i.target}" for i in IMPORTS if _layer(i.target) > _layer(i.module)]
    assert not upward


@pytest.mark.parametrize("below", ["template", "spec"])
def test_the_spec_and_templates_know_nothing_of_gpus_tuning_or_front_ends(below: str) -> None:
    forbidden = ("cutune.gpu", "cutune.tune", "cutune.agent", "cutune.lsp", "cutune.cli", "cutune.workflow")
    found = [
        f"{i.module} imports {i.target}" for i in IMPORTS if _part(i.module) == below and i.target.startswith(forbidden)
    ]
    assert not found


def test_the_core_never_imports_a_front_end() -> None:
    found = [
        f"{i.module} imports {i.target}"
        for i in IMPORTS
        if _part(i.module) not in FRONT_ENDS and _part(i.target) in FRONT_ENDS
    ]
    assert not found


def test_module_level_imports_have_no_cycle() -> None:
    """Without late imports to break them: a module's top-level imports never lead back to it."""
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for i in IMPORTS:
        if i.top_level:
            # `from package import module` is an import of the module (its package is being imported already)
            submodules = {f"{i.target}.{n}" for n in i.names} & modules
            graph[i.module] |= submodules or ({i.target} & modules)
    state: dict[str, int] = {}

    def cycle_from(m: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return (*path, m, t)
            if t not in state and (found := cycle_from(t, (*path, m))):
                return found
        state[m] = 2
        return None

    for m in sorted(modules):
        if m not in state:
            assert (found := cycle_from(m, ())) is None, " → ".join(found)


def test_only_the_workflow_assembles_autotune() -> None:
    """The CLI and the language server reach variants, backends, tuning and storage through the workflow."""
    found = [
        f"{i.module} imports {', '.join(i.names)} from {i.target}"
        for i in IMPORTS
        if _part(i.module) in FRONT_ENDS
        and i.target in CHAIN
        and ("*" in CHAIN[i.target] or CHAIN[i.target] & set(i.names))
    ]
    assert not found


def _calls(module: str, names: set[str]) -> list[str]:
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    calls = [n.func for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Call)]
    return sorted(f.id for f in calls if isinstance(f, ast.Name) and f.id in names)


def test_each_front_end_calls_each_use_case_once() -> None:
    use_cases = {"autotune", "run_prepared", "agent_autotune"}
    assert _calls("cutune.cli", use_cases) == [
        "agent_autotune",
        "run_prepared",
    ]  # tune prepares first: it prints variants
    assert _calls("cutune.lsp.jobs", use_cases) == ["agent_autotune", "autotune"]
    assert not [i for i in IMPORTS if i.target == "cutune.tune.run" and _part(i.module) not in {"tune", "workflow"}]
