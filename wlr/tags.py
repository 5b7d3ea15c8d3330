"""The replay tags: what replay's commits on a replica table say in ``commitInfo.userMetadata``.

``wlr:<master dbid>:<first>-<last>`` (``...:<txn>`` for one transaction) on the commit that lands
a segment or a transaction; ``...:part`` on the intermediate commits of a transaction that needs
several (a barrier: DDL or a full image), whose final commit carries the tag without it. A
transaction counts as applied only when a final commit covering it is in the table's log: each
table's progress is read back from its own Delta log (:class:`wlr.apply.Applier`).
"""

from __future__ import annotations

from .planner import span_text

TAG_PREFIX = "wlr:"
FINAL_PROPERTY = "wlr.txn"


def tag(dbid: str, txn: int, part: bool = False, first: int | None = None) -> str:
    """The replay tag of a commit of transaction ``txn``.

    Args:
        dbid (str): the master's database id.
        txn (int): the last transaction the commit applies.
        part (bool): the commit does not end the transaction (``...:part``).
        first (int | None): the segment's first transaction (None: ``txn`` alone).

    Returns:
        str: ``wlr:<dbid>:<first>-<txn>`` (``wlr:<dbid>:<txn>`` for one transaction), with
        ``:part`` appended for a part commit.
    """
    return f"{TAG_PREFIX}{dbid}:{span_text(txn if first is None else first, txn)}" + (":part" if part else "")


def parse_span(text: str | None, dbid: str) -> tuple[int, int, bool] | None:
    """The transactions a replay tag of master ``dbid`` names (the inverse of :func:`tag`).

    Args:
        text (str | None): a commit's ``commitInfo.userMetadata`` (None: the commit has none).
        dbid (str): the master's database id.

    Returns:
        tuple[int, int, bool] | None: ``(first txn, last txn, final)``; None when ``text`` is not
        a replay tag of that master.
    """
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
    """The last transaction a replay tag of master ``dbid`` names, and whether the commit ends it.

    Args:
        text (str | None): a commit's ``commitInfo.userMetadata`` (None: the commit has none).
        dbid (str): the master's database id.

    Returns:
        tuple[int, bool] | None: ``(last txn, final)``; None when ``text`` is not a replay tag
        of that master.
    """
    span = parse_span(text, dbid)
    return None if span is None else (span[1], span[2])
