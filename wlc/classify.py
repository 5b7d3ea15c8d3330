"""What a committed Delta version of a master table is as a transaction: none, a create, an
alter, change rows from the Change Data Feed, or the table's full image.

* a new table's first commit -> ``create`` (with its metadata); a change of what defines the
  table (:func:`wlcore.tabledef.definition`: its metadata, or its protocol's table features) -> ``alter``, with the ALTER TABLE operations that
  make it (:mod:`wlcore.tabledef`), or the table's image where there are none;
* a version with ``dataChange`` actions -> ``cdf`` when the Change Data Feed was on at that
  version, else ``image`` (correctness first);
* anything else (OPTIMIZE, VACUUM, REORG) -> not a transaction.

Pure rules over a commit and the table's definitions before and after it; :class:`wlc.capture.Capture`
reads the commits and calls :func:`classify` for each.
"""

from __future__ import annotations

from collections.abc import Callable

from wlcore import tabledef
from wlcore.batch import Planned
from wlcore.deltalog import Commit, TableMeta, meta_after


def shape_changed(old: TableMeta | None, new: TableMeta) -> bool:
    """True when ``new`` defines the table otherwise than ``old`` (:func:`wlcore.tabledef.definition`).

    Args:
        old (TableMeta | None): the definition before (None: not known: changed).
        new (TableMeta): the definition after.
    """
    return old is None or old.shape() != new.shape()


def added_columns(old: TableMeta | None, new: TableMeta) -> list[str]:
    """The columns ``new`` only adds to ``old``: appended at the end, nullable, without a
    comment, default, generation or identity, with everything else of the definition unchanged.
    Such an ALTER is what replay can land inside a segment's commit (rows before it have no
    value for the new columns, exactly as ``ADD COLUMNS`` leaves them).

    Args:
        old (TableMeta | None): the definition before (None: not known).
        new (TableMeta): the definition after.

    Returns:
        list[str]: their names; ``[]`` when anything else changed (or nothing was added).
    """
    if old is None:
        return []
    a, b = old.shape(), new.shape()
    of, nf = a.pop("columns"), b.pop("columns")
    if a != b or len(nf) <= len(of) or nf[: len(of)] != of:
        return []
    added = nf[len(of) :]
    if any(set(f) != {"name", "type", "nullable"} or not f["nullable"] for f in added):
        return []
    return [f["name"] for f in added]


def classify(
    name: str,
    commit: Commit,
    meta: TableMeta | None,
    first: bool,
    read_meta: Callable[[int], TableMeta],
    image: str | None = None,
) -> tuple[Planned | None, TableMeta | None]:
    """The transaction ``commit`` is, and the table's definition after it.

    Args:
        name: the table, ``schema.table``.
        commit: the committed version, as read from the table's log.
        meta: the table's definition before ``commit`` (None: not known, a new table).
        first: ``commit`` is the first version capture reads of this table.
        read_meta: ``read_meta(version)``, the table's full definition at a version (read anew
            for a first version, or after a hole in its log).
        image: ``"always"``: carry the version by the table's image; ``"if_change"``: so, when
            it changes data or definition; None: as the change feed says.

    Returns:
        ``(planned, meta after)``: ``planned`` is None when the version is no transaction.
    """
    if first or image == "always":
        new_meta: TableMeta | None = read_meta(commit.version)
    elif commit.metadata is None and not commit.clustering_changed and commit.protocol is None:
        new_meta = None
    else:
        new_meta = meta_after(meta, commit)
    ddl = None
    change = None
    ops = None
    if new_meta is not None and (first or shape_changed(meta, new_meta)):
        ddl = "create" if first or meta is None else "alter"
    current = new_meta or meta
    if commit.data_change:
        change = "cdf" if current is not None and current.change_feed else "image"
    if ddl == "alter":
        ops = tabledef.diff(meta, new_meta)
        if ops is None:
            change = "image"  # no ALTER TABLE form: replay rebuilds the table from the image
    if first and commit.version > 0:
        change = "image"  # history before this version is gone: start from the table's image
    if image == "always" or (image and (change is not None or ddl is not None)):
        change = "image"
    if ddl is None and change is None:
        return None, current
    adds = tuple(added_columns(meta, new_meta)) if ddl == "alter" and new_meta is not None and change != "image" else ()
    planned = Planned(
        name,
        commit.timestamp,
        commit.version,
        commit.operation,
        ddl,
        change,
        current,
        commit.user,
        adds,
        ops if change != "image" else None,
    )
    return planned, current
