"""Change rows -> net change in Arrow, for segments small enough to land without Spark (:mod:`wlr.deltars`).

The same rules as :func:`wlcore.collapse.net_by_key` and :func:`wlcore.collapse.net_by_image`
(MusicBrainz's packet chains: insert+update = insert, update+delete = delete, insert+delete =
nothing, delete+insert = update), on a pyarrow
Table held in memory: each key's last state in (master Delta version, change order), where within
one version a delete or pre-image comes before an insert or post-image. Vectorized: one sort, then
the first and last row of each run of equal keys; no Python loop over rows.

Spark's collapse breaks ties between two changes of one key at the same version and position by
the rows' canonical form; here such a tie (a master table holding a key twice) is refused
(:class:`Unsupported`), and Spark collapses that segment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .batch import CHANGE_TYPE, VERSION_COLUMN
from .collapse import FIRST, OP, POS, POSITIVE, VERSION, VERSION_IN_PATH

_VERSION_OF = re.compile(VERSION_IN_PATH)


class Unsupported(Exception):
    """These change rows cannot be collapsed here exactly; the message says why (Spark collapses them)."""


def read_rows(files: Iterable[str], missing: bool = False) -> pa.Table:
    """The change rows of Parquet ``files`` (local paths below ``.../wlc_version=<v>/``) as one table.

    INT96 timestamps (Spark's default Parquet timestamps) are read in microseconds, Spark's own
    unit, so instants before 1677 or after 2262 stay exact.

    Args:
        files (Iterable[str]): the change-row files of a segment.
        missing (bool): a column some files lack (written before an ALTER added it) reads NULL
            there; False: the files' schemas must be equal.

    Returns:
        pa.Table: the table's columns, ``_change_type``, ``__wlr_v`` (the master version, from the
        folder name) and ``__wlr_pos`` (1: insert or post-image, 0: delete or pre-image).

    Raises:
        Unsupported: a file is not below a ``wlc_version=<v>`` folder, or the files' schemas differ
            (beyond missing columns, when ``missing``).
    """
    parts = []
    for f in files:
        found = _VERSION_OF.search(f.replace("\\", "/"))
        if found is None:
            raise Unsupported(f"{f} is not below a {VERSION_COLUMN}=<version> folder")
        t = pq.read_table(f, coerce_int96_timestamp_unit="us")
        parts.append(t.append_column(VERSION, pa.repeat(pa.scalar(int(found.group(1)), pa.int64()), t.num_rows)))
    if not parts:
        raise Unsupported("no change rows")
    try:
        rows = pa.concat_tables(parts, promote_options="default" if missing else "none")
    except pa.ArrowInvalid as exc:
        raise Unsupported(f"change-row files of different schemas: {exc}") from None
    pos = pc.is_in(rows[CHANGE_TYPE], value_set=pa.array(POSITIVE)).cast(pa.int8())
    return rows.append_column(POS, pos)


def data_columns(rows: pa.Table) -> list[str]:
    """The table's own columns of ``rows`` (:func:`read_rows`), in order."""
    return [c for c in rows.column_names if c not in (CHANGE_TYPE, VERSION, POS)]


def _runs(sorted_rows: pa.Table, cols: Sequence[str]) -> pa.Array:
    """True at each row (but the first) whose ``cols`` differ from the row before."""
    n = sorted_rows.num_rows
    if n < 2:
        return pa.array([], pa.bool_())
    change = None
    for c in cols:
        col = sorted_rows[c].combine_chunks()
        differs = pc.not_equal(col.slice(1), col.slice(0, n - 1))
        change = differs if change is None else pc.or_(change, differs)
    return change


def net_by_key(rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """One row per key with its last state: the data columns, ``__wlr_op`` (the key exists after
    the segment) and ``__wlr_first`` (1: the key's first change was an insert, so it was absent).
    Keys inserted and deleted within the segment are left out.

    Args:
        rows (pa.Table): a segment's change rows (:func:`read_rows`).
        keys (Sequence[str]): the table's key columns (``wlc.key``).

    Returns:
        pa.Table: the net change.

    Raises:
        Unsupported: a key column holds NULL (matched by ``<=>``, which Spark's MERGE does), or
            one key changes twice at one version and position (the master holds it twice).
    """
    for k in keys:
        if rows[k].null_count:
            raise Unsupported(f"key column {k} holds NULL")
    cols = data_columns(rows)
    order = [(k, "ascending") for k in keys] + [(VERSION, "ascending"), (POS, "ascending")]
    s = rows.take(pc.sort_indices(rows, sort_keys=order))
    n = s.num_rows
    new_key = _runs(s, keys)
    if n > 1 and not pc.all(pc.or_(new_key, _runs(s, [VERSION, POS]))).as_py():
        raise Unsupported("a key changes twice at one master version and position")
    starts = pa.concat_arrays([pa.array([True]), new_key]) if n else pa.array([], pa.bool_())
    ends = pa.concat_arrays([new_key, pa.array([True])]) if n else pa.array([], pa.bool_())
    first_pos = s[POS].filter(starts)
    last = s.filter(ends)
    op = pc.equal(last[POS], 1)
    net = last.select(cols).append_column(OP, op).append_column(FIRST, first_pos)
    gone = pc.and_(pc.equal(first_pos, 1), pc.invert(op))  # insert+delete = nothing
    return net.filter(pc.invert(gone))


def after_images(table: pa.Table, rows: pa.Table) -> tuple[pa.Table, pa.Table, int]:
    """An unkeyed table's rows after a segment, with multiset semantics (deleting one of two
    identical rows leaves one), as :func:`wlcore.collapse.net_by_image` and Spark's replay MERGE by
    image make them: each full row image counted in the table, plus the segment's inserts and
    post-images, less its deletes and pre-images. Images are grouped by Arrow's hash grouping: NULL
    equals NULL, NaN equals NaN, ``-0.0`` differs from ``0.0`` (the canonical form's rules).

    Args:
        table (pa.Table): the table's rows now.
        rows (pa.Table): the segment's change rows (:func:`read_rows`), with the table's columns
            and types.

    Returns:
        tuple[pa.Table, pa.Table, int]: the table's rows after the segment (in no particular
        order); the images the segment deletes more often than the table holds them (empty unless
        the replica has diverged); how many images the segment changes (its net change's rows).
    """
    cols = table.column_names
    weight, delta = "__wlr_w", "__wlr_d"  # copies after the segment; the segment's own change
    sign = pc.subtract(pc.multiply(rows[POS].cast(pa.int64()), 2), 1)  # 1: insert or post-image, -1 else
    change = rows.select(cols).cast(table.schema).append_column(weight, sign).append_column(delta, sign)
    one, zero = (pa.repeat(pa.scalar(v, pa.int64()), table.num_rows) for v in (1, 0))
    both = pa.concat_tables([table.append_column(weight, one).append_column(delta, zero), change])
    images = both.group_by(cols).aggregate([(weight, "sum"), (delta, "sum")])  # one grouping of every row
    changed = pc.sum(pc.not_equal(images[f"{delta}_sum"], 0).cast(pa.int64())).as_py() or 0
    counts = images[f"{weight}_sum"]
    short = images.filter(pc.less(counts, 0)).select(cols)
    index = np.repeat(np.arange(images.num_rows), np.clip(counts.to_numpy(), 0, None))
    return images.select(cols).take(pa.array(index)), short, changed
