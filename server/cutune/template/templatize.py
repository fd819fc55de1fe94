"""templatize: run the recipes over one kernel, re-parsing after each rewrite, into a Template."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError, RecipeRefused
from cutune.template.diff import common_ends
from cutune.template.model import Refusal, Space, Template
from cutune.template.recipes import RECIPES, Recipe
from cutune.template.recipes.base import Draft

_LINE = re.compile(r"\bline (\d+)\b")


def templatize(model: SourceModel, kernel: str, *, recipes: Sequence[str] | None = None) -> Template:
    """Make `kernel`'s hidden choices explicit parameters with the registry's recipes (all, or those named),
    in the registry's order; the rewritten source behaves as the original at the space's defaults."""
    model.kernel(kernel)  # raises SourceError naming the kernels when absent
    draft = Draft(model.text)
    current = model
    applied: list[str] = []
    refused: list[Refusal] = []
    for recipe in _chosen(recipes):
        if current.text != draft.text:
            current = parse_source(draft.text, model.path, rewrite=True)
        try:
            result = recipe.apply(current, current.kernel(kernel), draft)
        except RecipeRefused as e:
            refused.append(_in_original(Refusal(e.recipe, e.reason), current.text, model.text))
            continue
        refused += [_in_original(r, current.text, model.text) for r in result.refusals[len(draft.refusals) :]]
        applied.append(recipe.name)
        draft = result
    return Template(
        kernel=kernel,
        source=draft.text,
        space=Space(draft.params, draft.constraints),
        applied=tuple(applied),
        refused=tuple(refused),
    )


def _in_original(refusal: Refusal, seen: str, original: str) -> Refusal:
    """A refusal whose `line N` references, written against the rewritten text a recipe saw, point into
    the original file instead (where the editor shows them)."""
    if seen == original or not _LINE.search(refusal.reason):
        return refusal
    line = _line_map(seen.splitlines(), original.splitlines())

    def in_original(m: re.Match[str]) -> str:
        n = int(m.group(1))
        found = line(n)
        return f"line {found if found is not None else n}"

    return Refusal(refusal.recipe, _LINE.sub(in_original, refusal.reason))


_EXACT_DIFF_LINES = 2000  # above this many changed-region lines, popular lines (`}`) stop anchoring the diff


def _line_map(seen: list[str], original: list[str]) -> Callable[[int], int | None]:
    """1-based line numbers of `seen` → the same lines in `original`, for the lines both share (None for others).

    Recipes change a few regions of a file: the lines before the first change and after the last map
    one to one, and only the region between is diffed (on a 50,000-line file a whole-file diff took a
    minute)."""
    head, tail = common_ends(seen, original)
    a, b = seen[head : len(seen) - tail], original[head : len(original) - tail]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=max(len(a), len(b)) > _EXACT_DIFF_LINES)
    between = {
        head + block.a + i + 1: head + block.b + i + 1
        for block in matcher.get_matching_blocks()
        for i in range(block.size)
    }

    def line(n: int) -> int | None:
        if 1 <= n <= head:
            return n
        if len(seen) - tail < n <= len(seen):
            return n - len(seen) + len(original)
        return between.get(n)

    return line


def _chosen(names: Sequence[str] | None) -> list[Recipe]:
    if names is None:
        return list(RECIPES.values())
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        raise CutuneError(f"unknown recipe(s) {', '.join(unknown)}; known: {', '.join(RECIPES)}")
    return [r for name, r in RECIPES.items() if name in names]
