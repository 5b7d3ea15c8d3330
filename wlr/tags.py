"""The replay tags: what replay's commits on a replica table say in ``commitInfo.userMetadata``.

``wlr:<master dbid>:<first>-<last>`` (``...:<txn>`` for one transaction) on the commit that lands
a segment or a transaction; ``...:part`` on the intermediate commits of a transaction that needs
several (a barrier: DDL or a full image), whose final commit carries the tag without it. A
transaction counts as applied only when a final commit covering it is in the table's log: each
table's progress is read back from its own Delta log (:class:`wlr.apply.Applier`).
"""

from __future__ import annotations

from .plan import span_text

TAG_PREFIX = "wlr:"
FINAL_PROPERTY = "wlr.txn"


def tag(dbid: str, txn: int, part: bool = False, first: int | None = None) -> str:
    """The replay tag of a commit of transaction ``txn`` (of the segment ``first``..``txn``)."""
    return f"{TAG_PREFIX}{dbid}:{span_text(txn if first is None else first, txn)}" + (":part" if part else "")


def parse_span(text: str | None, dbid: str) -> tuple[int, int, bool] | None:
    """``(first txn, last txn, final)`` from a replay tag of master ``dbid``, else None."""
    prefix = f"{TAG_PREFIX}{dbid}:"
    if not text or not text.startswith(prefix):
        return None
    rest = text[len(prefix) :].split(":")
    first, _, last = rest[0].partition("-")
    try:
        return int(first), int(last or first), len(rest) == 1
    except ValueError:
        return None


def parse_tag(text: str | None, dbid: str) -> tuple[int, bool] | None:
    """``(last txn, final)`` from a replay tag of master ``dbid``, else None."""
    span = parse_span(text, dbid)
    return None if span is None else (span[1], span[2])
