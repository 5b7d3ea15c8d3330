"""The API reference as plain Markdown, for reading the pages in the repository.

An API page holds a block per mkdocstrings directive (``::: wlc.Master`` and its options). The
site renders the directive with mkdocstrings; this module writes the same objects as Markdown a
forge shows: a heading, the signature and the docstring (Google style, its sections as lists) of
the object and of each public member that has a docstring. It reads the source with griffe, as
mkdocstrings does, without importing the packages, and follows the options mkdocs.yml and the
pages use: ``filters``, ``members``, ``inherited_members``, ``show_root_heading``,
``show_submodules`` and the ``__init__`` merged into its class.
"""

from __future__ import annotations

import logging
import re
from functools import cache
from pathlib import Path

import griffe
import yaml

from .shadowed import ShadowedFunctions

PACKAGES = ("wlcore", "wlc", "wlr")
FILTERS = ["!^_"]  # mkdocs.yml's filters: no private names
HEADING_LEVEL = 2  # mkdocs.yml's heading_level
WIDTH = 100  # a signature longer than this takes a line per parameter
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|exc|data|obj|const):`~?")
CODE = re.compile(r"(`+).+?\1", re.S)
LISTS = {
    "parameters": "Parameters",
    "other parameters": "Other parameters",
    "attributes": "Attributes",
    "raises": "Raises",
    "warns": "Warns",
    "returns": "Returns",
    "yields": "Yields",
    "receives": "Receives",
}


@cache
def _modules(root: Path) -> griffe.ModulesCollection:
    """The packages under ``root``, loaded from their source as the site's mkdocstrings loads them."""
    logging.getLogger("griffe").setLevel(logging.ERROR)  # its notes on docstrings are the site build's to show
    loader = griffe.GriffeLoader(
        extensions=griffe.load_extensions(ShadowedFunctions()),
        search_paths=[root],
        docstring_parser=griffe.Parser.google,
        docstring_options={"returns_multiple_items": False},
        allow_inspection=False,
    )
    for package in PACKAGES:
        loader.load(package)
    loader.resolve_aliases(implicit=False, external=False)
    return loader.modules_collection


def _text(text: str) -> str:
    """A docstring's text as Markdown: roles dropped before code, ``<``/``>`` escaped outside code."""
    text, out, at = ROLE.sub("`", text), [], 0
    for span in CODE.finditer(text):
        out += [text[at : span.start()].replace("<", "&lt;").replace(">", "&gt;"), span.group()]
        at = span.end()
    return "".join(out + [text[at:].replace("<", "&lt;").replace(">", "&gt;")])


def _indent(text: str) -> str:
    """A list item's text: its lines after the first indented into the item."""
    return "\n  ".join(_text(text).splitlines())


def _item(item) -> str:
    """One entry of a docstring's list section: name, type and description."""
    name = getattr(item, "name", "") or ""
    kind = str(item.annotation) if item.annotation else ""
    head = f"`{name}` (`{kind}`)" if name and kind and name != kind else f"`{name or kind}`" if name or kind else ""
    return f"- {head}: {_indent(item.description)}" if head else f"- {_indent(item.description)}"


def _docstring(obj) -> list[str]:
    """The object's docstring, a Markdown paragraph or list per section."""
    if not obj.docstring:
        return []
    out: list[str] = []
    for section in obj.docstring.parsed:
        kind = section.kind.value
        if kind == "text":
            out += [_text(section.value), ""]
        elif kind in LISTS:
            out += [f"**{section.title or LISTS[kind]}:**", ""] + [_item(i) for i in section.value] + [""]
        elif kind == "examples":
            for sub, text in section.value:
                out += (["```python", text, "```"] if sub.value == "examples" else [_text(text)]) + [""]
        elif kind == "admonition":
            out += [f"**{section.title}:** {_text(section.value.description)}", ""]
        else:  # deprecated, and summaries of members, which the members' own entries give
            out += [_text(str(getattr(section.value, "description", "")))] + [""] if kind == "deprecated" else []
    return out


def _parameters(func, drop_first: bool) -> list[str]:
    """A signature's parameters as Python writes them, ``/`` and ``*`` included."""
    params = list(func.parameters)[1 if drop_first else 0 :]
    out: list[str] = []
    star = False
    for i, param in enumerate(params):
        kind = param.kind
        if kind is griffe.ParameterKind.keyword_only and not star:
            out.append("*")
        star = star or kind in (griffe.ParameterKind.keyword_only, griffe.ParameterKind.var_positional)
        prefix = {griffe.ParameterKind.var_positional: "*", griffe.ParameterKind.var_keyword: "**"}.get(kind, "")
        text = prefix + param.name + (f": {param.annotation}" if param.annotation else "")
        if param.default is not None and not prefix:
            text += f" = {param.default}" if param.annotation else f"={param.default}"
        out.append(text)
        following = params[i + 1].kind if i + 1 < len(params) else None
        if kind is griffe.ParameterKind.positional_only and following is not griffe.ParameterKind.positional_only:
            out.append("/")
    return out


def _call(name: str, params: list[str], returns: str) -> str:
    """``name(params) -> returns``, a line per parameter when it would be longer than :data:`WIDTH`."""
    one = f"{name}({', '.join(params)}){returns}"
    if len(one) <= WIDTH or not params:
        return one
    return f"{name}(\n" + "".join(f"    {p},\n" for p in params) + f"){returns}"


def _signature(obj, name: str) -> str:
    """The object's signature: a call for a function or class, ``name: type`` for a value."""
    if obj.is_function:
        drop = obj.parent.is_class and "staticmethod" not in obj.labels
        return _call(name, _parameters(obj, drop), f" -> {obj.returns}" if obj.returns else "")
    if obj.is_class:
        init = _member(obj, "__init__", inherited=True)
        return _call(name, _parameters(init, True) if init is not None and init.is_function else [], "")
    value = f" = {obj.value}" if getattr(obj, "value", None) is not None and "property" not in obj.labels else ""
    return f"{name}: {obj.annotation}{value}" if obj.annotation else f"{name}{value}"


def _member(obj, name: str, inherited: bool):
    """``obj``'s member ``name`` (inherited ones too when asked), or None."""
    try:
        members = obj.all_members if inherited else obj.members
        member = members.get(name)
        return member.final_target if member is not None and member.is_alias else member
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _keep(name: str, filters: list[str]) -> bool:
    """mkdocstrings' filters: a ``!pattern`` that matches drops a name, else a pattern must match."""
    wanted = [f for f in filters if not f.startswith("!")]
    if any(re.search(f[1:], name) for f in filters if f.startswith("!")):
        return False
    return not wanted or any(re.search(f, name) for f in wanted)


def _members(obj, options: dict) -> list:
    """The members an entry shows, in source order: public, documented, passing the options."""
    inherited = obj.is_class and bool(options.get("inherited_members"))
    names = list(obj.all_members if inherited else obj.members)
    chosen = options.get("members")
    out = []
    for name in names:
        if (chosen is not None and name not in chosen) or not _keep(name, options.get("filters", FILTERS)):
            continue
        member = _member(obj, name, inherited)
        if member is None or not member.docstring or (member.is_module and not options.get("show_submodules")):
            continue
        if obj.is_module and not obj.members[name].is_public:
            continue
        out.append((name, member))
    return out


def _entry(obj, path: str, level: int, options: dict, heading: bool) -> list[str]:
    """One object's Markdown: anchor, heading, signature, bases, docstring, then its members."""
    out: list[str] = []
    if heading:
        label = " *property*" if "property" in getattr(obj, "labels", ()) else ""
        out += [f'<a id="{path}"></a>', "", f"{'#' * level} `{path}`{label}", ""]
        if not obj.is_module:
            out += ["```python", _signature(obj, path.rsplit(".", 1)[-1]), "```", ""]
        if obj.is_class and obj.bases:
            out += ["Bases: " + ", ".join(f"`{base}`" for base in obj.bases), ""]
    out += _docstring(obj)
    if obj.is_module or obj.is_class:
        below = level + 1 if heading else level
        for name, member in _members(obj, options):
            out += _entry(member, f"{path}.{name}", below, {"filters": options.get("filters", FILTERS)}, True)
    return out


def _anchors(lines: list[str]) -> list[str]:
    """Link definitions for the entries' anchors: ``[wlc.Master][wlc.Master]`` in a page's text links."""
    return [f"[{m[1]}]: #{m[1]}" for m in (re.fullmatch(r'<a id="(.+)"></a>', line) for line in lines) if m]


def reference(root: Path, directive: str) -> str:
    """The Markdown for one mkdocstrings directive: ``::: path`` and its indented YAML options."""
    first, _, rest = directive.partition("\n")
    path = first.removeprefix(":::").strip()
    options = (yaml.safe_load(rest) or {}).get("options", {}) if rest.strip() else {}
    try:
        obj = _modules(root)[path]
    except KeyError:
        raise ValueError(f"::: {path}: no such object in {', '.join(PACKAGES)}") from None
    if obj.is_alias:
        obj = obj.final_target
    lines = _entry(obj, path, HEADING_LEVEL, options, options.get("show_root_heading", True))
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines + [""] + _anchors(lines)) + "\n"
