"""Spark's and Arrow's collapse give one net change: a seeded property test over a few hundred random
change sets, collapsed by Spark all at once (each set's rows tagged by a set id, which joins the
key, or the image, so sets never mix), and set by set by Arrow.

Keyed sets cover ties (one key changed twice at one version and position), a key changed several
times in one version (delete then insert, pre- then post-image), deletes then re-inserts, and NULL
keys; Arrow must refuse exactly the sets with a tie or a NULL key (:class:`collapse.ArrowUnsupported`,
Spark lands those) and agree on every other. Unkeyed sets cover duplicate rows, pre- and post-images,
NULL, NaN, ``0.0`` and ``-0.0`` in images, and a replica table holding some images already.
"""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType

from wlcore import collapse
from wlcore.batch import CHANGE_TYPE

pytestmark = pytest.mark.spark

SEED = 40
SETS = 300  # of each kind, keyed and unkeyed
SID = "sid"  # the set id column
DATA = [SID, "k", "v", "d"]
SCHEMA = StructType(
    [
        StructField(SID, IntegerType()),
        StructField("k", IntegerType()),
        StructField("v", StringType()),
        StructField("d", DoubleType()),
        StructField(CHANGE_TYPE, StringType()),
        StructField(collapse.VERSION, LongType()),
        StructField(collapse.POS, IntegerType()),
    ]
)
ARROW = pa.schema(
    [
        (SID, pa.int32()),
        ("k", pa.int32()),
        ("v", pa.string()),
        ("d", pa.float64()),
        (CHANGE_TYPE, pa.string()),
        (collapse.VERSION, pa.int64()),
        (collapse.POS, pa.int8()),
    ]
)
FLOATS = [0.0, -0.0, float("nan"), 1.5, None]


def change(sid, k, v, d, kind, version):
    """One change row as a tuple of :data:`SCHEMA`'s columns."""
    return (sid, k, v, d, kind, version, 1 if kind in collapse.POSITIVE else 0)


def same(value):
    """A value Python compares as the canonical form does: floats by their text (``nan`` equals
    ``nan``, ``-0.0`` differs from ``0.0``)."""
    return repr(value) if isinstance(value, float) else value


def image(row) -> tuple:
    """A row's comparable form."""
    return tuple(same(x) for x in row)


def keyed_set(rnd: random.Random, sid: int) -> tuple[list[tuple], bool]:
    """A random keyed change set and whether Arrow must refuse it (a tie or a NULL key)."""
    rows, refuse = [], False
    keys = rnd.sample(range(6), rnd.randint(1, 4))
    if rnd.random() < 0.1:
        keys.append(None)
        refuse = True
    val = lambda: (rnd.choice("abc"), rnd.choice([1.5, 2.0, None]))  # noqa: E731
    for k in keys:
        for version in rnd.sample(range(1, 6), rnd.randint(1, 4)):
            kind = rnd.choice(["insert", "delete", "update", "delete+insert"]) if rnd.random() > 0.03 else "tie"
            if kind == "insert":
                rows.append(change(sid, k, *val(), "insert", version))
            elif kind == "delete":
                rows.append(change(sid, k, *val(), "delete", version))
            elif kind == "update":
                rows.append(change(sid, k, *val(), "update_preimage", version))
                rows.append(change(sid, k, *val(), "update_postimage", version))
            elif kind == "delete+insert":
                rows.append(change(sid, k, *val(), "delete", version))
                rows.append(change(sid, k, *val(), "insert", version))
            elif rnd.random() < 0.5:  # the master holds the key twice: a tie at both positions
                for _ in range(2):
                    rows.append(change(sid, k, *val(), "update_preimage", version))
                    rows.append(change(sid, k, *val(), "update_postimage", version))
                refuse = True
            else:  # two inserts of one key at one version: a tie after
                rows.append(change(sid, k, *val(), "insert", version))
                rows.append(change(sid, k, *val(), "insert", version))
                refuse = True
    rnd.shuffle(rows)
    return rows, refuse


def unkeyed_set(rnd: random.Random, sid: int) -> tuple[list[tuple], list[tuple]]:
    """A random unkeyed change set (few distinct images, so duplicates abound) and a table now."""
    pick = lambda: (sid, None, rnd.choice(["a", "b", None]), rnd.choice(FLOATS))  # noqa: E731
    rows = []
    for _ in range(rnd.randint(1, 12)):
        kind = rnd.choice(["insert", "delete", "update"])
        version = rnd.randint(1, 4)
        if kind == "update":
            rows.append(change(*pick(), "update_preimage", version))
            rows.append(change(*pick(), "update_postimage", version))
        else:
            rows.append(change(*pick(), kind, version))
    table = [pick() for _ in range(rnd.randint(0, 6))]
    return rows, table


def arrow_rows(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(ARROW.names, r)) for r in rows], schema=ARROW)


def by_set(tuples) -> dict[int, Counter]:
    """Rows (set id first) -> the multiset of each set's rows, in comparable form."""
    out: dict[int, Counter] = {}
    for t in tuples:
        out.setdefault(t[0], Counter())[image(t)] += 1
    return out


def test_keyed_spark_and_arrow_agree(spark):
    rnd = random.Random(SEED)
    sets = [keyed_set(rnd, sid) for sid in range(SETS)]
    everything = [r for rows, _ in sets for r in rows]
    net = collapse.net_by_key(spark.createDataFrame(everything, SCHEMA), [SID, "k"])
    spark_net = by_set(tuple(r) for r in net.select(*DATA, collapse.OP, collapse.FIRST).collect())  # one job
    agreed = 0
    for sid, (rows, refuse) in enumerate(sets):
        try:
            got = collapse.net_by_key_arrow(arrow_rows(rows), [SID, "k"])
        except collapse.ArrowUnsupported:
            assert refuse, f"set {sid}: Arrow refused a set Spark collapses alike: {rows}"
            continue
        assert not refuse, f"set {sid}: Arrow collapsed a tie or a NULL key: {rows}"
        arrow_net = by_set(tuple(r.values()) for r in got.select([*DATA, collapse.OP, collapse.FIRST]).to_pylist())
        assert arrow_net.get(sid, Counter()) == spark_net.get(sid, Counter()), f"set {sid}: {rows}"
        agreed += 1
    assert agreed > SETS // 2  # most sets are compared, not refused


def test_unkeyed_spark_and_arrow_agree(spark):
    rnd = random.Random(SEED + 1)
    sets = [unkeyed_set(rnd, sid) for sid in range(SETS)]
    everything = [r for rows, _ in sets for r in rows]
    net = collapse.net_by_image(spark.createDataFrame(everything, SCHEMA))
    counts: dict[int, Counter] = {}
    for r in net.select(*DATA, collapse.COUNT).collect():  # one job
        counts.setdefault(r[0], Counter())[image(r[:-1])] += r[-1]
    table_schema = pa.schema(list(ARROW)[: len(DATA)])
    for sid, (rows, table) in enumerate(sets):
        now = pa.Table.from_pylist([dict(zip(DATA, t)) for t in table], schema=table_schema)
        after, short, changed = collapse.after_images(now, arrow_rows(rows))
        net_counts = counts.get(sid, Counter())
        assert changed == len(net_counts), f"set {sid}: {rows}"
        expected = Counter(image(t) for t in table)
        for img, n in net_counts.items():
            expected[img] += n
        want_after = Counter({img: n for img, n in expected.items() if n > 0})
        want_short = {img for img, n in expected.items() if n < 0}
        assert Counter(image(tuple(r.values())) for r in after.to_pylist()) == want_after, f"set {sid}: {rows}"
        assert {image(tuple(r.values())) for r in short.to_pylist()} == want_short, f"set {sid}: {rows}"


def test_compacted_pieces_collapse_alike(spark):
    """A compacted piece (:func:`collapse.compact_by_key`, :func:`collapse.compact_by_image`) collapses
    to the net change of the rows it replaces: keyed, but for keys it leaves out for no net change
    (there before and after, in one state); unkeyed, exactly."""
    rnd = random.Random(SEED + 2)
    keyed = spark.createDataFrame([r for sid in range(SETS) for r in keyed_set(rnd, sid)[0]], SCHEMA)
    unkeyed = spark.createDataFrame([r for sid in range(SETS) for r in unkeyed_set(rnd, sid)[0]], SCHEMA)

    def reread(piece):
        return piece.withColumnRenamed("wlc_version", collapse.VERSION).withColumn(
            collapse.POS, (piece[CHANGE_TYPE].isin(*collapse.POSITIVE)).cast("int")
        )

    cols = [*DATA, collapse.OP, collapse.FIRST]
    whole = collapse.net_by_key(keyed, [SID, "k"]).select(*cols)
    piece = collapse.net_by_key(reread(collapse.compact_by_key(keyed, [SID, "k"], 9)), [SID, "k"]).select(*cols)
    mark = lambda df, m: df.withColumn("__side", F.lit(m))  # noqa: E731
    both = mark(whole, "whole").unionByName(mark(piece, "piece")).collect()  # one job

    def net_rows(side):  # a delete's other columns carry nothing: the applier deletes by key
        return Counter(
            image(tuple(r)[:-1] if r[collapse.OP] else (r[SID], r["k"], None, None, False, r[collapse.FIRST]))
            for r in both
            if r["__side"] == side
        )

    whole_rows, piece_rows = net_rows("whole"), net_rows("piece")
    assert not piece_rows - whole_rows
    left_out = whole_rows - piece_rows
    assert all(r[-2] is True and r[-1] == 0 for r in left_out)  # upserts of keys that were there before
    assert len(left_out) < len(whole_rows) // 4

    img = [*DATA, collapse.COUNT]
    whole = collapse.net_by_image(unkeyed).select(*img)
    piece = collapse.net_by_image(reread(collapse.compact_by_image(unkeyed, 9))).select(*img)
    both = mark(whole, "whole").unionByName(mark(piece, "piece")).collect()  # one job
    assert Counter(image(tuple(r)[:-1]) for r in both if r["__side"] == "whole") == Counter(
        image(tuple(r)[:-1]) for r in both if r["__side"] == "piece"
    )


# Regression cases: where the two engines differ. Arrow's domain is smaller than Spark's; it refuses
# what it cannot collapse as Spark does, and Spark collapses it.


def _keyed_both(spark, rows):
    """(Spark's net change as sorted tuples, Arrow's, or the ArrowUnsupported it raised)."""
    cols = [*DATA, collapse.OP, collapse.FIRST]
    spark_net = sorted(
        (
            image(tuple(r))
            for r in collapse.net_by_key(spark.createDataFrame(rows, SCHEMA), [SID, "k"]).select(*cols).collect()
        ),
        key=repr,
    )
    try:
        got = collapse.net_by_key_arrow(arrow_rows(rows), [SID, "k"]).select(cols).to_pylist()
    except collapse.ArrowUnsupported as exc:
        return spark_net, exc
    return spark_net, sorted((image(tuple(r.values())) for r in got), key=repr)


def test_tie_spark_takes_the_greatest_row_arrow_refuses(spark):
    """Two inserts of key 1 at version 3 (the master holds the key twice): Spark keeps the row whose
    canonical form is the greatest; Arrow refuses."""
    rows = [change(0, 1, "b", 1.5, "insert", 3), change(0, 1, "a", 2.0, "insert", 3)]
    spark_net, arrow = _keyed_both(spark, rows)
    assert spark_net == [(0, 1, "b", "1.5", True, 1)]
    assert isinstance(arrow, collapse.ArrowUnsupported)


def test_null_key_is_one_key_in_spark_arrow_refuses(spark):
    """Key NULL inserted at version 1, updated at 2: Spark collapses it as one key (``<=>``);
    Arrow refuses (delta-rs's MERGE matches by ``=``, never NULL)."""
    rows = [
        change(0, None, "a", None, "insert", 1),
        change(0, None, "a", None, "update_preimage", 2),
        change(0, None, "b", None, "update_postimage", 2),
    ]
    spark_net, arrow = _keyed_both(spark, rows)
    assert spark_net == [(0, None, "b", None, True, 1)]
    assert isinstance(arrow, collapse.ArrowUnsupported)


def test_delete_and_insert_in_one_version_both_take_the_insert(spark):
    """A delete and an insert of key 1 at version 2 (DELETE then INSERT as one MERGE): the delete is
    the state before, the insert the state after, in both engines."""
    rows = [
        change(0, 1, "a", None, "insert", 1),
        change(0, 1, "b", None, "insert", 2),
        change(0, 1, "a", None, "delete", 2),
    ]
    spark_net, arrow = _keyed_both(spark, rows)
    assert spark_net == arrow == [(0, 1, "b", None, True, 1)]


def test_compacted_delete_keeps_the_state_before(spark):
    """Key 1 updated from a to b at version 2, deleted at 3: the net change deletes key 1 (with its
    last delete row, b), a compacted piece with one ``delete`` of its state before the piece (a).
    Only the key of a delete matters, so both land the same."""
    rows = [
        change(0, 1, "a", None, "update_preimage", 2),
        change(0, 1, "b", None, "update_postimage", 2),
        change(0, 1, "b", None, "delete", 3),
    ]
    df = spark.createDataFrame(rows, SCHEMA)
    net = collapse.net_by_key(df, [SID, "k"]).select(*DATA, collapse.OP).collect()
    piece = collapse.compact_by_key(df, [SID, "k"], 3).select(*DATA, CHANGE_TYPE).collect()
    assert [tuple(r) for r in net] == [(0, 1, "b", None, False)]
    assert [tuple(r) for r in piece] == [(0, 1, "a", None, "delete")]
