"""Apps' own email templates (SPEC §14): what they may contain, checked before they are stored.

The sandbox alone is not the rule: a template is parsed and its syntax tree
walked against a whitelist of node types, names and filters, so anything
not listed (loops, macros, includes, imports, blocks, `set`, attribute or
item access, calls, arithmetic, string building) is refused at upload with
the line it is on. What passes can only print the documented values,
filtered by a few documented filters, and choose between parts with
`if`/`else` — so its output is bounded by its size times the longest value.
The render is bounded again all the same (bounded_render), and rendered in
Jinja's ImmutableSandboxedEnvironment with no globals, as a second wall.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

# The values an app's template may print (docs/templates.md).
VARIABLES = frozenset({
    "product_name", "email", "link", "code", "expires_at", "expires_in", "logo_url",
    "brand_color", "support_url", "locale",
})
# The filters it may apply; none can grow its input much or reach into Python.
FILTERS = ("upper", "lower", "capitalize", "title", "trim", "default", "e", "escape")
# What every part must print, so the person can act on the email.
REQUIRED = ("link", "code")
MAX_TEMPLATE_BYTES = 64 * 1024  # subject, text and html together
MAX_OUTPUT_CHARS = 256 * 1024  # per part
MAX_RENDER_SECONDS = 0.100  # per part (subject, text, html), checked between output pieces
MAX_CONSTANT_CHARS = 200  # a `default('…')` argument or a compared string
# How deep a template may nest, so that parsing, checking and compiling it stay far
# from Python's recursion and indentation limits (a template past them would parse
# here and fail in the worker): `if` inside `if`; `if` and `elif` counted together
# (Python nests an elif chain); an expression's operators, filters and brackets.
MAX_IF_DEPTH = 16
MAX_BRANCH_DEPTH = 64
MAX_EXPRESSION_DEPTH = 32

# Comparisons an `if` may make: equality only (no ordering tricks on strings).
_COMPARISONS = frozenset({"eq", "ne"})
_ALLOWED_NODES: tuple[type[nodes.Node], ...] = (
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.If, nodes.Name, nodes.Const,
    nodes.Filter, nodes.Not, nodes.And, nodes.Or, nodes.Compare, nodes.Operand,
)


class TemplateInvalid(ValueError):
    """A template refused at upload: the part, a line in it (1-based: where the fault is,
    line 1 when it is the whole template's, the last line when something is missing from
    the whole part) and why."""

    def __init__(self, part: str, line: int, reason: str) -> None:
        super().__init__(f"{part}, line {line}: {reason}")
        self.part = part
        self.line = line
        self.reason = reason


class RenderLimit(Exception):
    """A render ran past its time or output bound (the email falls back to the built-in)."""


def _finalize(value: object) -> object:
    """An unset brand field (None) prints as nothing, not 'None'."""
    return "" if value is None else value


def _unset_is_empty(filter_: Callable[..., object]) -> Callable[..., object]:
    """`filter_` seeing an unset brand field (None) as an empty value, never as 'None'."""
    def filtered(value: object, *args: object) -> object:
        return filter_("" if value is None else value, *args)
    return filtered


def _default(value: object, default_value: object = "") -> object:
    """`default` taking an unset brand field (None) as unset, as it takes an undefined one."""
    return default_value if value is None or isinstance(value, jinja2.Undefined) else value


def sandbox_environment(*, html: bool) -> jinja2.Environment:
    """The environment apps' templates compile in: no globals, the listed filters only,
    each taking an unset documented variable as unset."""
    env = ImmutableSandboxedEnvironment(
        autoescape=html, undefined=jinja2.StrictUndefined, finalize=_finalize,
        keep_trailing_newline=True,
    )
    env.globals.clear()  # no range, lipsum, cycler, joiner, namespace, dict
    env.filters = {name: _default if name == "default" else _unset_is_empty(env.filters[name])
                   for name in FILTERS}
    env.tests = {}
    return env


_PARSERS = {"subject": sandbox_environment(html=False), "text": sandbox_environment(html=False),
            "html": sandbox_environment(html=True)}


def _refuse(part: str, node: nodes.Node, reason: str) -> TemplateInvalid:
    return TemplateInvalid(part, getattr(node, "lineno", None) or 1, reason)


def _line_of(source: str, index: int) -> int:
    return source.count("\n", 0, index) + 1


def _last_line(source: str) -> int:
    return max(1, len(source.splitlines()))


_STATEMENT = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.If)
_OPENING = frozenset("([{-+")  # operators the parser recurses on
_BLOCKS = frozenset({"if", "for", "macro", "call", "filter", "block", "with", "autoescape",
                     "trans", "set"})


def _check_tokens(part: str, env: jinja2.Environment, source: str) -> None:
    """Refuse nesting that would make the parser itself recurse too deep: it recurses for
    each opening bracket, unary sign and `not` in a tag, and for each open block. The
    lexer does not recurse, so this runs before the parser."""
    blocks = 0  # blocks open
    opened = 0  # brackets, signs and `not` in the current tag
    tag_start = False  # the previous token began a block tag
    try:
        for lineno, kind, value in env.lex(source):
            if kind == "whitespace":
                continue
            if kind in ("block_begin", "variable_begin"):
                opened, tag_start = 0, kind == "block_begin"
                continue
            if tag_start and kind == "name" and value.startswith("end"):
                blocks -= 1
            elif tag_start and kind == "name" and value in _BLOCKS:
                blocks += 1
                if blocks > MAX_IF_DEPTH:
                    raise TemplateInvalid(part, lineno,
                                          f"nested more than {MAX_IF_DEPTH} levels of if")
            tag_start = False
            if (kind == "operator" and value in _OPENING) or (kind == "name" and value == "not"):
                opened += 1
                if opened > MAX_EXPRESSION_DEPTH:
                    raise TemplateInvalid(part, lineno, "an expression nested more than"
                                          f" {MAX_EXPRESSION_DEPTH} deep")
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateInvalid(part, exc.lineno, exc.message or "does not parse") from None


def _check_depth(part: str, node: nodes.Node, ifs: int = 0, branches: int = 0,
                 expression: int = 0) -> None:
    """Refuse a tree nested past the limits above (before _check_node walks it)."""
    if isinstance(node, nodes.If):
        ifs, branches = ifs + 1, branches + 1 + len(node.elif_)
        if ifs > MAX_IF_DEPTH:
            raise _refuse(part, node, f"nested more than {MAX_IF_DEPTH} levels of if")
        if branches > MAX_BRANCH_DEPTH:
            raise _refuse(part, node, f"nested more than {MAX_BRANCH_DEPTH} levels of"
                          " if and elif")
        # An elif is a branch of this if, at its level (counted in `branches` above).
        inside = [node.test, *node.body, *node.else_]
        for branch in node.elif_:
            inside.extend((branch.test, *branch.body, *branch.elif_, *branch.else_))
        for child in inside:
            _check_depth(part, child, ifs, branches, expression)
        return
    if not isinstance(node, _STATEMENT):
        expression += 1
        if expression > MAX_EXPRESSION_DEPTH:
            raise _refuse(part, node, f"an expression nested more than"
                          f" {MAX_EXPRESSION_DEPTH} deep")
    for child in node.iter_child_nodes():
        _check_depth(part, child, ifs, branches, expression)


def _compile(part: str, env: jinja2.Environment, source: str) -> jinja2.Template:
    """Compile as the worker will: what Python cannot compile is refused here, not there."""
    try:
        return env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateInvalid(part, exc.lineno, exc.message or "does not compile") from None
    except (SyntaxError, RecursionError, MemoryError) as exc:
        # A SyntaxError's line is in the generated Python, not in the template.
        raise TemplateInvalid(part, 1, f"does not compile ({type(exc).__name__}): nested"
                              " too deep or too large") from None


def _check_node(part: str, node: nodes.Node) -> None:
    if not isinstance(node, _ALLOWED_NODES):
        raise _refuse(part, node, f"{_describe(node)} is not allowed")
    if isinstance(node, nodes.Name):
        if node.ctx != "load":
            raise _refuse(part, node, f"assigning to {node.name!r} is not allowed")
        if node.name not in VARIABLES:
            raise _refuse(part, node, f"unknown variable {node.name!r}")
    elif isinstance(node, nodes.Filter):
        if node.name not in FILTERS:
            raise _refuse(part, node, f"filter {node.name!r} is not allowed")
        if node.kwargs or node.dyn_args or node.dyn_kwargs:
            raise _refuse(part, node, f"filter {node.name!r} takes plain arguments only")
        if node.name == "default" and len(node.args) > 1:
            raise _refuse(part, node, "default takes one argument")
        if node.name != "default" and node.args:
            raise _refuse(part, node, f"filter {node.name!r} takes no arguments")
        for argument in node.args:
            if not isinstance(argument, nodes.Const):
                raise _refuse(part, node, "a filter's argument must be a plain string")
    elif isinstance(node, nodes.Const):
        if not isinstance(node.value, str | bool) or node.value is None:
            raise _refuse(part, node, "only strings are allowed as constants")
        if isinstance(node.value, str) and len(node.value) > MAX_CONSTANT_CHARS:
            raise _refuse(part, node, f"a string constant is over {MAX_CONSTANT_CHARS} characters")
    elif isinstance(node, nodes.Operand) and node.op not in _COMPARISONS:
        raise _refuse(part, node, f"comparison {node.op!r} is not allowed (only == and !=)")
    for child in node.iter_child_nodes():
        _check_node(part, child)


def _describe(node: nodes.Node) -> str:
    names = {
        "For": "a loop ({% for %})", "Macro": "a macro", "CallBlock": "a call block",
        "Include": "an include", "Import": "an import", "FromImport": "an import",
        "Extends": "extends", "Block": "a block", "Assign": "set", "AssignBlock": "set",
        "Getattr": "attribute access", "Getitem": "item access", "Call": "a call",
        "Concat": "joining strings (~)", "Mul": "arithmetic", "Pow": "arithmetic",
        "Add": "arithmetic", "Sub": "arithmetic", "Div": "arithmetic", "FloorDiv": "arithmetic",
        "Mod": "formatting with %", "CondExpr": "an inline if", "Test": "a test (is …)",
        "FilterBlock": "a filter block", "With": "with", "Slice": "slicing",
        "List": "a list", "Tuple": "a tuple", "Dict": "a dict",
    }
    kind = type(node).__name__
    return names.get(kind, kind)


def _prints(tree: nodes.Template) -> set[str]:
    """The variables a part prints as they are (`{{ link }}`: no filter that could change
    them), outside any `if`."""
    return {child.name for output in tree.body if isinstance(output, nodes.Output)
            for child in output.nodes if isinstance(child, nodes.Name)}


@dataclass(frozen=True)
class CompiledPart:
    """One part of a checked template, compiled in the sandbox."""

    template: jinja2.Template
    plain: bool  # text and bare `{{ name }}` holes only (is_plain)


def check_template(subject: str, text: str, html: str) -> None:
    """Refuse (TemplateInvalid) what the sandbox rules out; see the module docstring."""
    compile_template(subject, text, html)


def compile_template(subject: str, text: str, html: str) -> dict[str, CompiledPart]:
    """The three parts checked (TemplateInvalid, as check_template) and compiled, by part
    name: each is parsed and compiled once, whether to store it or to send it."""
    size = sum(len(part.encode("utf-8")) for part in (subject, text, html))
    if size > MAX_TEMPLATE_BYTES:
        raise TemplateInvalid("template", 1,
                              f"{size} bytes; at most {MAX_TEMPLATE_BYTES} (64 KiB) in all")
    if "\n" in subject.strip() or "\r" in subject:
        raise TemplateInvalid("subject", 1, "the subject is one line")
    compiled: dict[str, CompiledPart] = {}
    for part, source in (("subject", subject), ("text", text), ("html", html)):
        if "\x00" in source:
            raise TemplateInvalid(part, _line_of(source, source.index("\x00")),
                                  "contains a NUL character")
        env = _PARSERS[part]
        _check_tokens(part, env, source)
        try:
            tree = env.parse(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateInvalid(part, exc.lineno, exc.message or "does not parse") from None
        except RecursionError:  # a backstop: _check_tokens bounds the parser's recursion
            raise TemplateInvalid(part, 1, "nested too deep to parse") from None
        _check_depth(part, tree)
        _check_node(part, tree)
        if part != "subject":
            missing = [name for name in REQUIRED if name not in _prints(tree)]
            if missing:
                raise TemplateInvalid(part, _last_line(source), "must print " + " and ".join(
                    f"{{{{ {name} }}}}" for name in missing) + " as is, outside any if")
        compiled[part] = CompiledPart(_compile(part, env, source), is_plain(tree))
    return compiled


def is_plain(tree: nodes.Template) -> bool:
    """Text and bare `{{ name }}` holes only: renderable by substitution alone."""
    return all(isinstance(output, nodes.Output)
               and all(isinstance(n, nodes.TemplateData | nodes.Name) for n in output.nodes)
               for output in tree.body)


def bounded_render(template: jinja2.Template) -> Callable[[Mapping[str, object]], str]:
    """`template`'s render, stopped (RenderLimit) past MAX_OUTPUT_CHARS or MAX_RENDER_SECONDS.

    Jinja renders by yielding pieces; the bounds are checked between them.
    A single piece cannot run long or grow large: the whitelist admits no
    expression whose cost is not bounded by its source (check_template).
    """
    def render(context: Mapping[str, object]) -> str:
        deadline = time.perf_counter() + MAX_RENDER_SECONDS
        return _bounded_join(template.generate(context), deadline)

    return render


def _bounded_join(pieces: Iterable[str], deadline: float) -> str:
    out: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_OUTPUT_CHARS:
            raise RenderLimit(f"output over {MAX_OUTPUT_CHARS} characters")
        if time.perf_counter() > deadline:
            raise RenderLimit(f"render over {MAX_RENDER_SECONDS * 1000:.0f} ms")
        out.append(piece)
    return "".join(out)
