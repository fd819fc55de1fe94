"""inline: calls of small `__device__` helpers inside a kernel's stride loops written out in place, so the
loop transforms see the helper's memory accesses as the loop's own.

A call that is a statement (`h<T>(args);`), a declaration's initialiser (`float v = h(args);`) or an
assignment's right side (`x = h(args);`) becomes a block that declares each parameter as a local bound to
its argument (by value, or by reference where the parameter is one: what the call did), then runs the
helper's statements. The helper's template parameters become the call's explicit template arguments, and
its parameters and locals are renamed `cutune_inl<k>_<name>`, so nothing shadows the caller's names. A
value-returning helper's single `return e;` (its last statement) hands `e` to the caller. Earlier returns, from
the branches of `if`s (`if (idx < 0) return idx + n; ... return idx;`), are written as setting a result local
(`cutune_inl<k>_0ret`), with the statements after each such `if` moved into its branches that do not return: every
path runs what it ran before and nothing after its return. A call that updates a
local (`acc = h(acc, v)`) binds the parameter to the local itself where nothing else can see it meanwhile (same
type, no other argument reads it, its address never taken): the helper's `acc += ...` is then the kernel's own.
Inlined from the kernel's top (the canonical step), a helper's own `__shared__` declarations move to the
kernel's top scope, one per helper: a shared variable is one object per block wherever it is declared.

A call stays a call, with the reason returned, when inlining could change what it does: a recursive or
overloaded helper, template arguments left to deduction, variadic parameters, a return from inside a loop, switch
or block, static locals, shared ones inside a loop's helper (or sized by the kernel's locals), a name the helper
reads from file scope that the kernel declares too, a helper from another namespace (an anonymous one inside the
kernel's, or around it, is the same), or a call nested inside a larger expression. Helpers that call helpers are
inlined a few levels deep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import declarator_name
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.loops import line_indent, stride_loops

PREFIX = "cutune_inl"
_DEPTH = 4  # helpers calling helpers: inlined this many levels deep
_LOOPS = ("for_statement", "while_statement", "do_statement")
# a block-wide barrier: a helper that waits at one cooperates across the block (a block reduction), which the row
# transforms must see written out as they see a loop
_BARRIER = "__syncthreads"
_FRESH = re.compile(rf"\b{PREFIX}(\d+)_")
_COPIES = 4  # early returns written out: the statements after them copied into branches, at most this much text


@dataclass(frozen=True)
class Inlined:
    """A kernel's file with the helper calls of its stride loops inlined, and why other calls were not."""

    model: SourceModel  # the original model when no call was inlined
    calls: int
    refusals: tuple[str, ...]  # "helper: reason", each once


@dataclass(frozen=True)
class _Helper:
    name: str
    definition: Node  # the function_definition
    template: Node | None  # the enclosing template_declaration
    namespace: str


def inline_helpers(model: SourceModel, kernel: str, *, looping: bool = False) -> Inlined:
    """`kernel`'s stride loops with the calls of the file's simple `__device__` helpers written out in place;
    with `looping`, instead the calls anywhere in the kernel of the helpers that hold a loop (so the loop
    transforms see it)."""
    calls = 0
    refusals: list[str] = []
    hoisted: dict[str, str] | None = {} if looping else None  # over every pass: one declaration per name
    for depth in range(_DEPTH + 1):
        src = KernelSource(model, model.kernel(kernel))
        helpers = _helpers(src)
        looping_names = _looping(src, helpers) if looping else set()
        loops = [] if looping else stride_loops(src)[0]
        edits = EditList(src.data)
        edited: list[tuple[int, int]] = []
        # the regex scan of a 50,000-line file takes 40 ms; a text without the prefix is the common case
        fresh = (
            max((int(m.group(1)) + 1 for m in _FRESH.finditer(model.text)), default=0) if PREFIX in model.text else 0
        )
        bodies = [src.body] if looping else [lp.body for lp in loops]
        sites = [c for body in bodies for c in descendants(body, "call_expression")]
        for call in sites:
            name, scope = _callee(src, call)
            found = helpers.get(name, [])
            if not found or (scope and scope != found[0].namespace.split("::")[-1]):
                continue  # not a helper of this file (a builtin, or another namespace's function)
            if looping and name not in looping_names:
                continue
            if any(a <= call.start_byte < b for a, b in edited):
                continue  # inside a call inlined in this pass: the next pass sees it
            result = _inline(src, call, found, f"{PREFIX}{fresh + len(edited)}_", hoisted)
            if isinstance(result, str):
                refusals.append(f"{name}: {result}")
                continue
            start, end, text = result
            edits.replace(start, end, text)
            edited.append((start, end))
        if not edited:
            break
        declared = _declared(src, src.body)
        new = [text for name, text in (hoisted or {}).items() if name not in declared]
        if new:  # one object per block, as the helper's own was, whichever call site uses it
            indent = line_indent(src.data, src.body.named_children[0].start_byte) if src.body.named_children else "  "
            edits.insert(src.body.start_byte + 1, "".join(f"\n{indent}{text}" for text in new))
        if depth == _DEPTH:
            refusals.append(f"helpers nested deeper than {_DEPTH} calls are not inlined")
            break
        model = parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)
        calls += len(edited)
    return Inlined(model, calls, tuple(dict.fromkeys(refusals)))


def _helpers(src: KernelSource) -> dict[str, list[_Helper]]:
    """The file's `__device__` function definitions by name (several: overloads)."""
    found: dict[str, list[_Helper]] = {}
    for f in src.model.device_functions:
        node: Node | None = src.root.descendant_for_byte_range(f.span.start_byte, max(f.span.end_byte - 1, 0))
        while node is not None and node.type not in ("function_definition", "template_declaration"):
            node = node.parent
        template = node if node is not None and node.type == "template_declaration" else None
        if template is not None:
            node = next((c for c in template.named_children if c.type == "function_definition"), None)
        if node is not None and node.child_by_field_name("body") is not None:
            found.setdefault(f.name, []).append(_Helper(f.name, node, template, f.namespace))
    return found


def _callee(src: KernelSource, call: Node) -> tuple[str, str]:
    """The called function's name and the scope it is qualified with ('' when none)."""
    function = call.child_by_field_name("function")
    scope = ""
    while function is not None and function.type == "qualified_identifier":
        scope = src.field(function, "scope")
        function = function.child_by_field_name("name")
    if function is not None and function.type == "template_function":
        function = function.child_by_field_name("name")
    return (src.text(function) if function is not None and function.type == "identifier" else ""), scope


def _template_args(call: Node) -> list[Node]:
    function = call.child_by_field_name("function")
    while function is not None and function.type == "qualified_identifier":
        function = function.child_by_field_name("name")
    if function is None or function.type != "template_function":
        return []
    args = function.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _named(namespace: str) -> str:
    """A namespace without its anonymous parts: an anonymous namespace's names are visible in the one around it
    (and those around it from inside it), so a helper there reads the same names from the kernel's."""
    return "::".join(part for part in namespace.split("::") if part)


def _inline(
    src: KernelSource, call: Node, found: list[_Helper], prefix: str, hoisted: dict[str, str] | None = None
) -> tuple[int, int, str] | str:
    """The edit that writes `call` out in place (start, end, text), or why it cannot be; with `hoisted`, the
    helper's `__shared__` declarations are added there (name → declaration) for the kernel's top scope."""
    if len(found) > 1:
        return "is overloaded: which definition a call means needs overload resolution"
    helper = found[0]
    if _named(helper.namespace) != _named(src.kernel.namespace):
        return f"is defined in namespace '{helper.namespace}', the kernel in '{src.kernel.namespace}'"
    fn, body = helper.definition, helper.definition.child_by_field_name("body")
    declarator = fn.child_by_field_name("declarator")
    pointers = 0
    while declarator is not None and declarator.type != "function_declarator":
        if declarator.type != "pointer_declarator":
            return "returns a reference or a function pointer"
        pointers += 1
        declarator = declarator.child_by_field_name("declarator")
    parameters = declarator.child_by_field_name("parameters") if declarator is not None else None
    if body is None or parameters is None:
        return "has no body to inline"
    if any(_callee(src, c)[0] == helper.name for c in descendants(body, "call_expression")):
        return "is recursive"
    params = [p for p in parameters.named_children if p.type != "comment"]
    variadic = any(c.type == "variadic_parameter" or src.text(c) == "..." for c in parameters.children)
    if variadic or any(p.type not in ("parameter_declaration", "optional_parameter_declaration") for p in params):
        return "has variadic parameters"
    names = [declarator_name(p.child_by_field_name("declarator")) for p in params]
    if any(n is None or n.type != "identifier" for n in names) and src.text(parameters) != "(void)":
        return "has an unnamed parameter"
    if any(descendants(p, "array_declarator") for p in params):
        return "takes an array parameter"
    arg_list = call.child_by_field_name("arguments")
    args = [a for a in arg_list.named_children if a.type != "comment"] if arg_list is not None else []
    params = [] if src.text(parameters) == "(void)" else params
    # parameters the call leaves out take their default values (the call compiles, so each has one)
    omitted = params[len(args) :]
    if len(args) > len(params) or any(p.child_by_field_name("default_value") is None for p in omitted):
        return f"is called with {len(args)} arguments for {len(params)} parameters"
    tsubst = _template_substitution(src, helper, call)
    if isinstance(tsubst, str):
        return tsubst
    shared = _shared_declarations(src, body) if hoisted is not None else []
    blocker = _body_blocker(src, body, shared)
    if blocker is not None:
        return blocker
    statements = [s for s in body.named_children if s.type != "comment" and s not in shared]
    returns = _returns(body)
    void = src.field(fn, "type") == "void" and pointers == 0
    last = statements[-1] if statements else None
    early = bool(returns) and (len(returns) > 1 or returns[0] != last)  # written out by _structured
    value = last.named_children[0] if returns and not early and last is not None and last.named_children else None
    if not void and value is None and not early:
        return "returns a value without a single `return` as its last statement"
    rename = {src.text(n): prefix + src.text(n) for n in names if n is not None}
    rename |= {n: prefix + n for n in _declared(src, body)}
    captured = _captured(src, body, set(rename) | set(tsubst))
    if captured is not None:
        return captured
    for d in shared:
        rename[_param_name(src, d)] = f"cutune_shared_{helper.name}_{_param_name(src, d)}"
    moved: dict[str, str] = {}  # the shared declarations this call moves to the kernel's top scope
    for d in shared:
        text, name = _rewritten(src, d, rename, tsubst), rename[_param_name(src, d)]
        if set(re.findall(r"[A-Za-z_]\w*", text)) - {name} & _declared(src, src.body):
            return f"declares shared memory sized by the kernel's locals (line {src.line(d)})"
        if (hoisted or {}).get(name, text) != text:
            return f"declares shared memory whose type differs between its calls (line {src.line(d)})"
        moved[name] = text
    indent = line_indent(src.data, call.start_byte)
    head = [f"// cutune: inlined {helper.name}"]
    values = [src.text(a) for a in args] + [_rewritten(src, _default(p), rename, tsubst) for p in omitted]
    threaded = _threaded(src, call, params, args, value, tsubst)
    if threaded is not None:
        rename[_param_name(src, params[threaded])] = src.text(args[threaded])
    head += [
        _declaration(src, p, rename, tsubst) + " = " + v + ";"
        for k, (p, v) in enumerate(zip(params, values, strict=True))
        if k != threaded
    ]
    assigned = None if void else _result(prefix)  # where an early return leaves the value
    if early:
        lines = _structured(src, statements, assigned, rename, tsubst)
        if isinstance(lines, str):
            return lines
        if sum(map(len, lines)) > _COPIES * len(src.text(body)):
            return f"returns on so many paths that writing them out copies its statements more than {_COPIES} times"
        head += lines
    else:
        head += [_rewritten(src, s, rename, tsubst) for s in statements if s is not last or not returns]
    result = (assigned or "") if early else _rewritten(src, value, rename, tsubst) if value is not None else ""
    updated = call.parent is not None and src.field(call.parent, "left") == (
        src.text(args[threaded]) if threaded is not None else None
    )
    if updated and result == src.text(args[threaded or 0]):  # `x = h(x)` returning x: nothing to assign
        statement = call.parent.parent if call.parent is not None else None
        assert statement is not None
        placed: tuple[int, int, str] | str = (statement.start_byte, statement.end_byte, _block(head, indent))
    else:
        return_type = _return_type(src, fn, pointers, tsubst)
        placed = _placed(src, call, head, result, void, return_type, prefix, indent, early)
    if hoisted is not None and not isinstance(placed, str):
        hoisted.update(moved)
    return placed


def _threaded(
    src: KernelSource, call: Node, params: list[Node], args: list[Node], value: Node | None, tsubst: dict[str, str]
) -> int | None:
    """The parameter an updating call threads its caller's local through, where the block may update the local in
    place (`acc = h(acc, v)` with `T h(T a, ...) { ...; return e; }`: the body's `a` is `acc`, then `acc = e`): the
    argument is the kernel's one local of that name, of the parameter's own type (no conversion in), no other
    argument reads it, its address is never taken nor a reference bound to it, and the call's value is assigned to
    it (nothing sees it between), or the call leaves it dead (`r = h(acc)`, where what the helper does to its copy
    is never read: `_dead_after`); else None."""
    parent = call.parent
    if parent is None or parent.parent is None or value is None:
        return None
    updating = (
        parent.type == "assignment_expression"
        and src.field(parent, "operator") == "="
        and parent.child_by_field_name("right") == call
        and parent.parent.type == "expression_statement"
    )
    target = src.field(parent, "left") if updating else ""
    at = [k for k, a in enumerate(args) if src.text(a) == target]
    updating = updating and bool(at)
    if not updating:  # `r = h(acc)`: threaded where the call leaves `acc` dead
        at = [k for k, a in enumerate(args) if a.type == "identifier" and _dead_after(src, call, src.text(a))]
        target = src.text(args[at[0]]) if len(at) == 1 else ""
    if len(at) != 1 or at[0] >= len(params):
        return None
    k = at[0]
    declarator = params[k].child_by_field_name("declarator")
    if declarator is None or declarator.type != "identifier":
        return None
    if any(target in {src.text(i) for i in descendants(a, "identifier")} for j, a in enumerate(args) if j != k):
        return None

    def bare_type(text: str) -> str:
        return " ".join(w for w in text.split() if w != "const")

    binding = _binding(src, call, target)
    declared = _local_types(src, [binding]).get(target) if binding is not None else None
    own = " ".join(_rewritten(src, c, {}, tsubst) for c in params[k].children if c.end_byte <= declarator.start_byte)
    if declared is None or bare_type(declared) != bare_type(own):
        return None
    for node in descendants(src.body, "pointer_expression", "init_declarator"):
        if node.type == "pointer_expression":
            seen = src.field(node, "operator") == "&" and src.field(node, "argument") == target
        else:
            seen = src.field(node, "value") == target and "&" in src.field(node, "declarator")
        if seen:
            return None
    return k


def _dead_after(src: KernelSource, call: Node, name: str) -> bool:
    """Whether the local `name` is dead after `call`: the call's statement is one of the kernel body's own (no loop
    runs it again) and the first later statement naming `name` sets it afresh (`name = e;`, e not reading it), or
    none names it."""
    statement = call
    while statement.parent is not None and statement.parent != src.body:
        statement = statement.parent
    if statement.parent != src.body:
        return False
    for later in (s for s in src.body.named_children if s.start_byte >= statement.end_byte):
        if not any(src.text(i) == name and not _shadowed(src, i, later) for i in descendants(later, "identifier")):
            continue
        assignment = later.named_children[0] if later.type == "expression_statement" and later.named_children else None
        right = assignment.child_by_field_name("right") if assignment is not None else None
        return (
            assignment is not None
            and assignment.type == "assignment_expression"
            and src.field(assignment, "operator") == "="
            and src.field(assignment, "left") == name
            and right is not None
            and not any(src.text(i) == name for i in descendants(right, "identifier"))
        )
    return True


def _binding(src: KernelSource, call: Node, name: str) -> Node | None:
    """The kernel's declaration of the local `name` that `call` sees: the innermost block's or `for` header's before
    it, else the body's; None where there is none (a parameter) or it is not the body's own."""
    node = call.parent
    while node is not None and node != src.body.parent:
        scope = [node.child_by_field_name("initializer")] if node.type == "for_statement" else node.named_children
        if node.type in ("for_statement", "compound_statement"):
            for d in reversed([d for d in scope if d is not None and d.type == "declaration"]):
                names = [declarator_name(x) for x in d.children_by_field_name("declarator")]
                if d.start_byte < call.start_byte and any(n is not None and src.text(n) == name for n in names):
                    return d
        node = node.parent
    return None


def _shadowed(src: KernelSource, ident: Node, top: Node) -> bool:
    """Whether `ident` names a local of a scope inside `top` (a block's or a `for` header's own declaration of the
    name before it), not the local of the kernel's body."""
    name, node = src.text(ident), ident.parent
    while node is not None and node.start_byte >= top.start_byte and node.end_byte <= top.end_byte:
        scope = node.child_by_field_name("initializer") if node.type == "for_statement" else node
        own = (
            [scope]
            if node.type == "for_statement"
            else node.named_children
            if node.type == "compound_statement"
            else []
        )
        for d in (d for d in own if d is not None and d.type == "declaration" and d.start_byte < ident.start_byte):
            if any(
                src.text(n) == name for n in (declarator_name(x) for x in d.children_by_field_name("declarator")) if n
            ):
                return True
        node = node.parent
    return False


def _returns(node: Node) -> list[Node]:
    """The `return` statements under `node` that leave it (not those of a lambda's body)."""
    return [
        r
        for r in descendants(node, "return_statement")
        if not any(a.type == "lambda_expression" for a in _ancestors(r, node))
    ]


def _ancestors(node: Node, top: Node) -> list[Node]:
    """The nodes between `node` and `top`, both excluded."""
    found: list[Node] = []
    parent = node.parent
    while parent is not None and parent != top:
        found.append(parent)
        parent = parent.parent
    return found


def _branch(node: Node | None) -> list[Node]:
    """The statements of an `if`'s branch (a block's, or the one statement; none where there is no branch)."""
    if node is not None and node.type == "else_clause":
        node = next((c for c in node.named_children if c.type != "comment"), None)
    if node is None:
        return []
    if node.type == "compound_statement":
        return [c for c in node.named_children if c.type != "comment"]
    return [node]


def _always_returns(statements: list[Node]) -> bool:
    """Whether every path through the statements ends in a `return`."""
    for s in statements:
        if s.type == "return_statement":
            return True
        if (
            s.type == "if_statement"
            and s.child_by_field_name("alternative") is not None
            and _always_returns(_branch(s.child_by_field_name("consequence")))
            and _always_returns(_branch(s.child_by_field_name("alternative")))
        ):
            return True
    return False


def _structured(
    src: KernelSource, statements: list[Node], ret: str | None, rename: dict[str, str], tsubst: dict[str, str]
) -> list[str] | str:
    """The helper's statements with each `return e;` written `ret = e;` (or `e;`, void), the statements after an
    `if` that may return moved into the branches that do not: every path runs the statements it ran before, in
    the same order, and nothing after its return; or why not (a return inside a loop, switch or block)."""
    out: list[str] = []
    for k, s in enumerate(statements):
        if not _returns(s):
            out.append(_rewritten(src, s, rename, tsubst))
            continue
        if s.type == "return_statement":
            value = next((c for c in s.named_children if c.type != "comment"), None)
            if value is not None:
                text = _rewritten(src, value, rename, tsubst)
                out.append(f"{ret} = {text};" if ret else f"(void)({text});")
            return out  # what follows a return never runs
        if s.type != "if_statement":
            kind = {"compound_statement": "block", "switch_statement": "switch"}.get(s.type, "loop")
            return f"returns from inside a {kind} (line {src.line(s)})"
        condition = s.child_by_field_name("condition")
        assert condition is not None
        rest = statements[k + 1 :]
        arms: list[str] = []
        for branch in (_branch(s.child_by_field_name("consequence")), _branch(s.child_by_field_name("alternative"))):
            lines = _structured(src, branch if _always_returns(branch) else [*branch, *rest], ret, rename, tsubst)
            if isinstance(lines, str):
                return lines
            arms.append("".join("\n  " + ln.replace("\n", "\n  ") for ln in lines))
        constexpr = " constexpr" if any(c.type == "constexpr" for c in s.children) else ""
        head = f"if{constexpr} {_rewritten(src, condition, rename, tsubst)} {{{arms[0]}\n}}"
        out.append(head + (f" else {{{arms[1]}\n}}" if arms[1] else ""))
        return out  # the rest runs inside the branches that fall through
    return out


def _param_name(src: KernelSource, node: Node) -> str:
    """The name a parameter (or a one-declarator declaration) declares."""
    name = declarator_name(node.child_by_field_name("declarator"))
    assert name is not None  # a named parameter, or a shared declaration _shared_declarations read
    return src.text(name)


def _default(param: Node) -> Node:
    """An optional parameter's default value."""
    value = param.child_by_field_name("default_value")
    assert value is not None
    return value


def _declaration(src: KernelSource, param: Node, rename: dict[str, str], tsubst: dict[str, str]) -> str:
    """A parameter as a local's declaration (renamed, its template parameters substituted), without a default."""
    text = _rewritten(src, param, rename, tsubst)
    value = param.child_by_field_name("default_value")
    if value is None:
        return text
    return text[: len(text) - len(_rewritten(src, value, rename, tsubst))].rstrip().removesuffix("=").rstrip()


def _block(lines: list[str], indent: str) -> str:
    """The inlined statements as a block at `indent`."""
    return (
        "{\n" + "\n".join(indent + "  " + ln.replace("\n", "\n" + indent + "  ") for ln in lines) + "\n" + indent + "}"
    )


def _placed(
    src: KernelSource,
    call: Node,
    head: list[str],
    result: str,
    void: bool,
    return_type: str,
    prefix: str,
    indent: str,
    early: bool = False,
) -> tuple[int, int, str] | str:
    """The inlined block put where the call was: as its statement, before its declaration, or assigning; with
    `early`, `head` has left the value in `result` (the call's result local, which a block declares first)."""

    def block(last: str, declared: bool = False) -> str:
        lines = [f"{return_type} {result};", *head] if early and not void and not declared else head
        return _block([*lines, last] if last else lines, indent)

    parent = call.parent
    if parent is not None and parent.type == "expression_statement":
        return parent.start_byte, parent.end_byte, block(f"(void)({result});" if result else "")
    if void:
        return f"returns void but its call's value is used (line {src.line(call)})"
    if parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("right") == call:
        statement = parent.parent
        if statement is not None and statement.type == "expression_statement":
            lhs, op = src.field(parent, "left"), src.field(parent, "operator")
            return statement.start_byte, statement.end_byte, block(f"{lhs} {op} {result};")
    if parent is not None and parent.type == "init_declarator" and parent.child_by_field_name("value") == call:
        declaration = parent.parent
        if (
            declaration is not None
            and declaration.type == "declaration"
            and len(declaration.children_by_field_name("declarator")) == 1
            and declaration.parent is not None
            and declaration.parent.type == "compound_statement"
        ):
            ret = _result(prefix)
            before = src.data[declaration.start_byte : call.start_byte].decode()
            after = src.data[call.end_byte : declaration.end_byte].decode()
            last = "" if early else f"{ret} = {result};"
            text = f"{return_type} {ret};\n{indent}{block(last, declared=True)}\n{indent}{before}{ret}{after}"
            return declaration.start_byte, declaration.end_byte, text
    return (
        f"is called inside a larger expression (line {src.line(call)}): only a call that is a statement, "
        "a declaration's initialiser or an assignment's right side is inlined"
    )


def _result(prefix: str) -> str:
    """The call's result local: `{prefix}0ret`, which no renamed name of the helper can be (`{prefix}` and an
    identifier, which does not start with a digit), so a helper's own local `ret` does not shadow it."""
    return f"{prefix}0ret"


def _template_substitution(src: KernelSource, helper: _Helper, call: Node) -> dict[str, str] | str:
    """The helper's template parameters → the call's explicit template arguments, or why there are none."""
    if helper.template is None:
        return {}
    plist = helper.template.child_by_field_name("parameters")
    tparams = [p for p in plist.named_children if p.type != "comment"] if plist is not None else []
    targs = _template_args(call)
    if len(targs) > len(tparams) or any(
        p.type not in ("type_parameter_declaration", "parameter_declaration") for p in tparams
    ):
        return "has template parameters of a kind inlining does not substitute (packs, templates, defaults)"
    subst: dict[str, str] = {}
    for k, p in enumerate(tparams):
        name = (
            next((c for c in p.named_children if c.type == "type_identifier"), None)
            if p.type == "type_parameter_declaration"
            else declarator_name(p.child_by_field_name("declarator"))
        )
        if name is None:
            return "has an unnamed template parameter"
        if k < len(targs):
            a = targs[k]
            subst[src.text(name)] = src.text(a) if p.type == "type_parameter_declaration" else f"({src.text(a)})"
            continue
        deduced = _deduced(src, helper, call, src.text(name)) if p.type == "type_parameter_declaration" else None
        if deduced is None:
            return f"leaves template argument {src.text(name)} to a deduction inlining does not make"
        subst[src.text(name)] = deduced
    return subst


_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict)\b|[*&\s]")


def _deduced(src: KernelSource, helper: _Helper, call: Node, tname: str) -> str | None:
    """The type `tname` stands for, read from the call: an argument passed for a parameter of type T, T*, const T&
    (qualifiers aside) that names a kernel parameter or local of the caller (or offsets one), whose declared type is
    then the same shape; None when no such argument tells."""
    declarator = helper.definition.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    parameters = declarator.child_by_field_name("parameters") if declarator is not None else None
    arg_list = call.child_by_field_name("arguments")
    if parameters is None or arg_list is None:
        return None
    params = [p for p in parameters.named_children if p.type != "comment"]
    args = [a for a in arg_list.named_children if a.type != "comment"]
    types = {p.name: p.type for p in src.kernel.params} | _local_types(src)
    for param, arg in zip(params, args, strict=False):
        name = declarator_name(param.child_by_field_name("declarator"))
        shape = src.text(param)[: name.start_byte - param.start_byte] if name is not None else ""
        if _QUALIFIERS.sub("", shape) != tname:
            continue
        base = arg
        while base.type == "binary_expression" and src.field(base, "operator") in ("+", "-"):
            base = base.child_by_field_name("left") or base
        if base.type != "identifier" or src.text(base) not in types:
            continue
        declared = types[src.text(base)]
        if shape.count("*") != declared.count("*"):
            continue  # T* from a T** (or T from a T*): another shape
        deduced = _QUALIFIERS.sub(" ", declared).split()
        if len(deduced) == 1:
            return deduced[0]
    return None


def _local_types(src: KernelSource, declarations: list[Node] | None = None) -> dict[str, str]:
    """The declared types (with pointers) of the kernel body's locals declared with one declarator (of those
    `declarations` where given)."""
    types: dict[str, str] = {}
    for d in src.in_body("declaration") if declarations is None else declarations:
        declarators = d.children_by_field_name("declarator")
        if len(declarators) != 1:
            continue
        name = declarator_name(declarators[0])
        if name is not None and name.type == "identifier":
            types[src.text(name)] = src.text(d)[: name.start_byte - d.start_byte]
    return types


def _shared_declarations(src: KernelSource, body: Node) -> list[Node]:
    """The helper's `__shared__` arrays and variables declared at its top level, one name each, neither `extern` nor
    initialised: one object per block wherever they are declared, so the kernel's top scope may declare them."""
    found = []
    for d in body.named_children:
        declarators = d.children_by_field_name("declarator") if d.type == "declaration" else []
        words = {src.text(c) for c in d.children if c.type in ("type_qualifier", "storage_class_specifier")}
        if (
            "__shared__" in words
            and "extern" not in words
            and len(declarators) == 1
            and declarators[0].type != "init_declarator"
            and declarator_name(declarators[0]) is not None
        ):
            found.append(d)
    return found


def _looping(src: KernelSource, helpers: dict[str, list[_Helper]]) -> set[str]:
    """The helpers that hold a loop or a block barrier (a block reduction with its shuffles unrolled), or call
    (through the file's helpers) one that does."""
    calls = {
        name: {_callee(src, c)[0] for h in found for c in descendants(h.definition, "call_expression")}
        for name, found in helpers.items()
    }
    looping = {
        name
        for name, found in helpers.items()
        if any(descendants(h.definition, *_LOOPS) or _BARRIER in calls[name] for h in found)
    }
    while grown := {name for name, called in calls.items() if called & looping} - looping:
        looping |= grown
    return looping


def _body_blocker(src: KernelSource, body: Node, hoisted: list[Node]) -> str | None:
    """Why the helper's statements cannot run in the caller's scope as they are (its shared declarations aside,
    those `hoisted` to the kernel's top scope), or None."""
    if body.has_error:  # written out, the unparsed text would leave the kernel unreadable to every transform
        broken = (descendants(body, "ERROR") or [body])[0]
        return f"has code the parser cannot read (line {src.line(broken)})"
    for node in descendants(body, "storage_class_specifier", "goto_statement", "labeled_statement", "identifier"):
        if any(d.start_byte <= node.start_byte < d.end_byte for d in hoisted):
            continue
        text = src.text(node)
        if node.type == "storage_class_specifier" and text == "static":
            return f"has a static local (line {src.line(node)})"
        if node.type in ("goto_statement", "labeled_statement"):
            return f"jumps with goto (line {src.line(node)})"
        if text == "__shared__":
            return f"declares shared memory (line {src.line(node)})"
    for node in descendants(body, "type_qualifier", "attribute_specifier"):
        if src.text(node) == "__shared__" and not any(d.start_byte <= node.start_byte < d.end_byte for d in hoisted):
            return f"declares shared memory (line {src.line(node)})"
    return None


def _declared(src: KernelSource, node: Node) -> set[str]:
    """Every name a declaration under `node` declares (each declarator of `float a, b;` too)."""
    names: set[str] = set()
    for d in descendants(node, "declaration"):
        for declarator in d.children_by_field_name("declarator"):
            name = declarator_name(declarator)
            if name is not None and name.type == "identifier":
                names.add(src.text(name))
    return names


def _captured(src: KernelSource, body: Node, own: set[str]) -> str | None:
    """A name the helper reads from outside itself that the kernel declares too (it would read the kernel's)."""
    kernel_names = {p.name for p in src.kernel.params} | _declared(src, src.body)
    for node in descendants(body, "identifier"):
        name = src.text(node)
        parent = node.parent
        if parent is not None and parent.type == "qualified_identifier":
            continue
        if name not in own and name in kernel_names:
            return f"reads {name} from outside itself (line {src.line(node)}), a name the kernel declares too"
    return None


def _rewritten(src: KernelSource, node: Node, rename: dict[str, str], tsubst: dict[str, str]) -> str:
    """The node's text with the helper's names renamed and its template parameters substituted."""
    edits = []
    for n in descendants(node, "identifier", "type_identifier"):
        text = src.text(n)
        if n.parent is not None and n.parent.type == "qualified_identifier":
            continue
        if n.type == "identifier" and text in rename:
            edits.append((n, rename[text]))
        elif text in tsubst:
            edits.append((n, tsubst[text]))
    pieces, pos = [], node.start_byte
    for n, new in edits:
        pieces += [src.data[pos : n.start_byte].decode(), new]
        pos = n.end_byte
    pieces.append(src.data[pos : node.end_byte].decode())
    return "".join(pieces)


def _return_type(src: KernelSource, fn: Node, pointers: int, tsubst: dict[str, str]) -> str:
    """The helper's return type (a pointer keeps the const of what it points to; a value drops its const)."""
    type_node = fn.child_by_field_name("type")
    base = _rewritten(src, type_node, {}, tsubst) if type_node is not None else "int"
    if not pointers:
        return base
    before = type_node.start_byte if type_node is not None else fn.end_byte
    qualifiers = [src.text(c) for c in fn.children if c.type == "type_qualifier" and c.start_byte < before]
    return " ".join([*qualifiers, base]) + "*" * pointers
