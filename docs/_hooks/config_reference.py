"""The configuration reference, made from the packaged defaults.

``docs/reference/configuration.md`` holds the generated block ``defaults``; ``make reference``
fills it with a table per section of ``wlcore/defaults/wlc.yaml``: every key, its default as the
file writes it, and the file's comment on it. The values come from PyYAML; the comments from the
file's lines. The two readings must name the same keys, else generating fails; a unit test fails
when the page drifts from the defaults the package ships.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import yaml

DEFAULTS = Path("wlcore", "defaults", "wlc.yaml")
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[^\s:#][^:]*?):(?=\s|$)(?P<rest>.*)$")


def _split_comment(text: str) -> tuple[str, str | None]:
    """``value  # comment`` -> (value, comment): the first ``#`` outside quotes after a blank."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].strip(), text[i + 1 :].strip()
    return text.strip(), None


def _scan(lines: list[str]) -> tuple[list[str], list[dict]]:
    """The file's header comment and its keys in order: path, raw value, comment, notes."""
    header: list[str] = []
    entries: list[dict] = []
    stack: list[tuple[int, str]] = []
    noted = None  # the entry the comment lines just read are a note on
    continues = None  # the indent of a key line whose comment the next comment lines continue
    for line in lines:
        if not line.strip():
            continues = noted = None
            continue
        match = KEY_LINE.match(line)
        if match is None:
            if not line.lstrip().startswith("#"):
                raise ValueError(f"{DEFAULTS}: neither a key nor a comment: {line.strip()!r}")
            column, note = line.index("#"), line.strip()[1:].strip()
            if not entries:
                header.append(note)
            elif continues is not None and column > continues:
                entries[-1]["comment"] += " " + note
            elif noted is not None:  # a note's next line
                noted["notes"][-1] += " " + note
            else:  # a note on the mapping it is indented into
                owner = ".".join(key for indent, key in stack if indent < column)
                noted = next((e for e in entries if e["path"] == owner), entries[-1])
                noted["notes"].append(note)
            continue
        noted = None
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"].strip()))
        value, comment = _split_comment(match["rest"])
        continues = indent if comment is not None else None
        entries.append({"path": ".".join(k for _, k in stack), "value": value, "comment": comment or "", "notes": []})
    return header, entries


def _keys(tree: dict, prefix: str = "") -> set[str]:
    """Every key path of the parsed YAML, mappings included."""
    out = set()
    for key, value in tree.items():
        path = f"{prefix}{key}"
        out.add(path)
        if isinstance(value, dict):
            out |= _keys(value, path + ".")
    return out


def _text(text: str) -> str:
    """Markdown for a comment: code spans kept, ``<``/``>`` and ``|`` escaped outside them."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = html.escape(parts[i], quote=False)
    return "`".join(parts).replace("|", "\\|")


def reference(root: Path) -> str:
    """The generated Markdown: the header comment, then a table per top-level section."""
    source = root / DEFAULTS
    text = source.read_text(encoding="utf-8")
    header, entries = _scan(text.splitlines())
    scanned, parsed = {e["path"] for e in entries}, _keys(yaml.safe_load(text))
    if scanned != parsed:
        raise ValueError(
            f"{DEFAULTS}: the comment reader and YAML disagree on the keys "
            f"(only YAML: {sorted(parsed - scanned)}; only here: {sorted(scanned - parsed)})"
        )
    out = ["From the header of `wlcore/defaults/wlc.yaml`:", "", "> " + _text(" ".join(header)), ""]
    for entry in entries:
        path, depth = entry["path"], entry["path"].count(".")
        if depth == 0:
            out += ["", f"## `{path}`", ""]
            if entry["comment"] and not entry["value"]:
                out += [_text(entry["comment"]), ""]
            out += ["| setting | default | meaning |", "|---|---|---|"]
        value = f"`{entry['value']}`" if entry["value"] else ""
        if depth or entry["value"]:
            out.append(f"| `{path}` | {value} | {_text(entry['comment'])} |")
        for note in entry["notes"]:
            out.append(f"| | | {_text(note)} |")
    return "\n".join(out) + "\n"
