"""Verification: a replica compared with its master, table by table, at the replica's last
consistent tick (``wlr verify``, :meth:`wlr.Replica.verify`), as a reconcile step compares row
counts, definitions and content. Nothing is written.

The master's side is read by Delta time travel at the versions that tick stands for, found in
the published batches without reading any table: the batch holding the tick carries capture's
cursors, each table's master version with exactly the transactions up to the batch's end, and
its records give the version of each transaction inside it. Each table is then compared on:

- its **definition** as replication carries it (columns with types, nullability and comments,
  partitioning, clustering, replicated properties and CHECK constraints:
  :meth:`wlcore.deltalog.TableMeta.shape`), read from both Delta logs;
- its **rows**, where the data is: a small table of flat columns (at most
  ``replica.deltars_bytes`` a side) read by delta-rs in this process and compared sorted; any
  other, and one not found equal that way, by Spark: the **row count** and an
  **order-independent hash of every row** (the sum of Spark's ``xxhash64`` of each row), one
  job a side, the master's side filtered by a selective replica's row filter;
- where they differ, the **first differing rows** (their keys where the table has ``wlc.key``):
  the rows of each side the other lacks (Spark's ``exceptAll``).

A replica table written outside replay after the tick (a path write) differs: it is named, and
compared at its newest version where replay has not committed since. A table of the master the
replica should carry but lacks is reported missing. A table is "not compared" (saying why) when
the master's table is gone, made again since the tick, or unreadable at its version, or replay
made the replica's again; nothing is compared when the batches holding the tick are pruned or
from before a promotion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from wlcore.deltalog import TableMeta, list_versions, metadata_at, read_commit
from wlcore.errors import NotFoundError
from wlcore.logstore import LogStore
from wlcore.names import quote_ident, split_name
from wlcore.settings import settings
from wlcore.storage import Storage

if TYPE_CHECKING:
    from .select import Selection

EQUAL, DIFFERS, NOT_COMPARED = "equal", "differs", "not compared"


@dataclass
class TableCheck:
    """The comparison of one table (:func:`verify`).

    Attributes:
        table (str): ``schema.table``.
        status (str): ``"equal"``, ``"differs"`` or ``"not compared"``.
        replica_version (int | None): the replica table's Delta version read (None: none).
        master_version (int | None): the master table's Delta version read (None: none).
        replica_rows (int | None): the replica's row count (None: not counted).
        master_rows (int | None): the master's row count (None: not counted).
        problems (list[str]): what differs (definition, count, content), or why it was not compared.
        rows (list[str]): the first differing rows, ``replica lacks ...`` / ``master lacks ...``
            (their key columns where the table has ``wlc.key``).
        engine (str): what read the rows: ``"delta-rs"`` (both sides small, found equal in this
            process), ``"spark"``, or ``""`` (not read).
    """

    table: str
    status: str
    replica_version: int | None = None
    master_version: int | None = None
    replica_rows: int | None = None
    master_rows: int | None = None
    problems: list[str] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)
    engine: str = ""


@dataclass
class Verification:
    """What :meth:`wlr.Replica.verify` found.

    Attributes:
        replica (str): the replica's name.
        master (str): its master's name.
        tick (int): the transaction both sides were read at.
        tables (list[TableCheck]): one per table, by name.
        reason (str): why nothing could be compared ("": the tables were).
    """

    replica: str
    master: str
    tick: int
    tables: list[TableCheck]
    reason: str = ""

    @property
    def equal(self) -> bool:
        """True when every table was compared and found equal (False: one differs, one could not
        be compared, or nothing could: :attr:`reason`)."""
        return not self.reason and all(t.status == EQUAL for t in self.tables)

    def render(self) -> str:
        """The result as a table for people, then each difference."""
        head = ("table", "result", "replica rows", "master rows", "replica version", "master version", "read by")
        body = [
            (
                t.table,
                t.status,
                _cell(t.replica_rows),
                _cell(t.master_rows),
                _cell(t.replica_version),
                _cell(t.master_version),
                t.engine or "-",
            )
            for t in self.tables
        ]
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        lines = [f"replica {self.replica} against master {self.master} at transaction {self.tick}"]
        if self.reason:
            return "\n".join([*lines, f"nothing compared: {self.reason}"])
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *body]]
        for t in self.tables:
            for p in t.problems:
                lines.append(f"{t.table}: {p}")
            for r in t.rows:
                lines.append(f"{t.table}: {r}")
        differ = sum(t.status == DIFFERS for t in self.tables)
        skipped = sum(t.status == NOT_COMPARED for t in self.tables)
        lines.append(
            (
                f"{differ} of {len(self.tables)} tables differ"
                if differ
                else f"{len(self.tables) - skipped} tables equal"
            )
            + (f"; {skipped} not compared" if skipped else "")
        )
        return "\n".join(lines)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


Versions = dict[str, tuple[int | None, frozenset[str]]]
"""``{schema.table: (master version, its Delta table ids)}`` (version None: dropped by then; ids
empty: not known)."""


def master_versions(store: LogStore, tick: int) -> Versions | str:
    """Each master table's Delta version holding exactly the transactions up to ``tick``, from
    the level-0 batches (no table is read): the cursors of the batch before the one holding
    ``tick``, moved by that batch's records up to it (or the cursors of the batch ending there),
    with the Delta table ids capture knows of each (a table made again since has another).

    Args:
        store (LogStore): the master's published log.
        tick (int): a transaction id (>= 0).

    Returns:
        Versions | str: the versions; or why they cannot be found: the batch holding ``tick`` (or
        the one before it) is pruned or is the master's first, or it was written by the master
        before a promotion (its cursors are of the old master's tables).

    Raises:
        BatchError: a manifest read is damaged.
    """
    refs = store.batches()
    owner = store.manifest(refs[-1]).dbid if refs else ""
    for i in range(len(refs) - 1, -1, -1):
        manifest = store.manifest(refs[i])
        if not manifest.txns or manifest.first_txn > tick:
            continue
        if manifest.dbid != owner:
            return f"transaction {tick} was published before a promotion (the old master's versions)"
        if manifest.last_txn <= tick:
            return {name: (c.version, frozenset(c.known_ids())) for name, c in manifest.cursors.tables.items()}
        if i == 0 or refs[i - 1].number != manifest.batch - 1:
            where = "the master's first" if manifest.batch == 0 else "the first one published (those before pruned)"
            return (
                f"transaction {tick} is inside batch {manifest.batch}, {where}: no batch records the versions before it"
            )
        prior = store.manifest(refs[i - 1])
        if prior.dbid != owner:
            return f"transaction {tick} is inside the first batch after a promotion"
        out: Versions = {name: (c.version, frozenset(c.known_ids())) for name, c in prior.cursors.tables.items()}
        for rec in manifest.txns:
            if rec.txn <= tick:
                ids = out.get(rec.table, (None, frozenset()))[1] if rec.ddl is None else frozenset()
                out[rec.table] = (rec.version if rec.ddl != "drop" else None, ids)
        return out
    return f"no published level-0 batch holds transaction {tick} (pruned)"


def verify(
    spark: Callable[[], Any],
    replica: str,
    master: str,
    tick: int,
    versions: dict[str, int],
    replica_storage: Storage,
    replica_path: str,
    master_storage: Storage,
    master_path: str,
    store: LogStore,
    selection: Selection,
) -> Verification:
    """Compare every table of a replica with its master at ``tick`` (see the module docstring).

    Args:
        spark (Callable[[], SparkSession]): gives the session that reads both sides where
            delta-rs does not (:class:`wlcore.session.LateSession`: started at its first use).
        replica (str): the replica's name.
        master (str): the master's name.
        tick (int): the replica's last consistent tick.
        versions (dict[str, int]): ``{schema.table: Delta version}`` of the replica's tables at ``tick``.
        replica_storage (Storage): the storage holding the replica.
        replica_path (str): the replica's folder.
        master_storage (Storage): the storage holding the master.
        master_path (str): the master's folder.
        store (LogStore): the master's published log (where the replica reads it).
        selection (Selection): what the replica carries (tables, row filters).

    Returns:
        Verification: one :class:`TableCheck` a table (none when nothing could be compared: its
        ``reason`` says why).

    Raises:
        NotFoundError: the master's folder is not there (verify reads the master's tables).
        BatchError: a manifest read is damaged.
    """
    if not master_storage.isdir(master_path):
        raise NotFoundError(
            f"verify reads the master's tables, and {master_storage.uri(master_path)} is not there; "
            "run it where the master's folder is reachable"
        )
    found = master_versions(store, tick) if tick >= 0 else "the replica has replayed no transaction since its start"
    if isinstance(found, str):
        return Verification(replica, master, tick, [], reason=found)
    checks: list[TableCheck] = []
    names = set(versions) | {t for t, (v, _ids) in found.items() if v is not None and selection.wants(t)}
    for table in sorted(names):
        checks.append(
            _table(
                spark,
                table,
                versions.get(table),
                found.get(table, (None, frozenset())),
                (replica_storage, Storage.join(replica_path, *split_name(table))),
                (master_storage, Storage.join(master_path, *split_name(table))),
                selection.predicate(table),
                tick,
            )
        )
    return Verification(replica, master, tick, checks)


def _table(
    spark: Callable[[], Any],
    table: str,
    rv: int | None,
    at: tuple[int | None, frozenset[str]],
    rep: tuple[Storage, str],
    mas: tuple[Storage, str],
    keep: str | None,
    tick: int,
) -> TableCheck:
    mv, ids = at
    check = TableCheck(table, EQUAL, rv, mv)
    if mv is None:
        check.status, check.problems = DIFFERS, ["on the replica, but not on the master at this tick"]
        return check
    master_meta = _meta(mas, mv)
    if master_meta is None or (ids and master_meta.table_id not in ids):
        check.status = NOT_COMPARED
        check.problems = [
            f"the master's table is gone or its version {mv} is no longer in its log"
            if master_meta is None
            else f"the master's table was made again after transaction {tick}"
        ]
        return check
    if rv is None:
        check.status, check.problems = DIFFERS, ["on the master, but missing on the replica"]
        return check
    from .apply import made_again_after  # with pyspark: not at import (wlr status and wlr log start no Spark)

    if made_again_after(*rep, rv, tick) is not None:
        check.status, check.problems = (
            NOT_COMPARED,
            [f"replay made the table again after transaction {tick} (verify again)"],
        )
        return check
    foreign, replayed = _after(rep, rv)
    if foreign:  # a write outside replay: compared where readers of the table see it
        check.problems.append(f"written outside replay after version {rv}: {', '.join(foreign)}")
        if not replayed:
            rv = check.replica_version = list_versions(*rep)[-1]
    replica_meta = _meta(rep, rv)
    if replica_meta is None:
        check.status, check.problems = DIFFERS, [f"the replica's version {rv} is not in its log"]
        return check
    if replica_meta.shape() != master_meta.shape():
        check.problems.append("definition differs: " + _shape_difference(replica_meta, master_meta))
    if keep is None and not check.problems and _plain(master_meta) and _plain(replica_meta):
        rows = _equal_small(rep, rv, mas, mv, min(settings().replica.deltars_bytes, SMALL_BYTES))
        if rows is not None:
            check.replica_rows = check.master_rows = rows
            check.engine = "delta-rs"
            return check
    try:
        _by_spark(check, spark(), (rep, rv), (mas, mv), keep, master_meta)
    except Exception as exc:  # a side Spark cannot read (the master's files vacuumed): not compared
        from wlcore.errors import first_line

        check.status, check.problems = NOT_COMPARED, [*check.problems, f"Spark cannot read it: {first_line(exc)}"]
        return check
    if check.problems:
        check.status = DIFFERS
    return check


def _by_spark(
    check: TableCheck,
    session: Any,
    replica: tuple[tuple[Storage, str], int],
    master: tuple[tuple[Storage, str], int],
    keep: str | None,
    master_meta: TableMeta,
) -> None:
    """Count and hash both sides with Spark into ``check``; where they differ, its first differing rows."""
    from pyspark.sql import functions as F

    (rep, rv), (mas, mv) = replica, master
    check.engine = "spark"
    cols = [f["name"] for f in master_meta.schema.get("fields", [])]
    mine = session.read.format("delta").option("versionAsOf", rv).load(rep[0].uri(rep[1]))
    theirs = session.read.format("delta").option("versionAsOf", mv).load(mas[0].uri(mas[1]))
    if keep is not None:
        theirs = theirs.filter(F.coalesce(F.expr(keep), F.lit(False)))
    shared = [c for c in cols if c in set(mine.columns)]
    a, b = _comparable(mine, shared), _comparable(theirs, shared)
    (check.replica_rows, r_hash), (check.master_rows, m_hash) = _digest(a), _digest(b)
    if check.replica_rows != check.master_rows:
        check.problems.append(f"{check.replica_rows} rows on the replica, {check.master_rows} on the master")
    if r_hash != m_hash or check.replica_rows != check.master_rows:
        if check.replica_rows == check.master_rows:
            check.problems.append("content differs (the rows' hashes)")
        keys = [k for k in master_meta.key_columns if k in shared] or shared
        for side, rows in (("replica lacks", b.exceptAll(a)), ("master lacks", a.exceptAll(b))):
            for row in rows.select(*map(quote_ident, keys)).limit(3).collect():
                check.rows.append(f"{side} {', '.join(f'{k}={row[k]!r}' for k in keys)}")


# the Arrow types two sides are sorted and compared in: flat ones (a float column holding NaN is
# left to Spark, as NaN never equals NaN in Arrow)
def _flat(kind: Any) -> bool:
    import pyarrow as pa

    t = pa.types
    return bool(
        t.is_integer(kind)
        or t.is_string(kind)
        or t.is_large_string(kind)
        or t.is_boolean(kind)
        or t.is_date(kind)
        or t.is_decimal(kind)
        or t.is_timestamp(kind)
        or t.is_floating(kind)
    )


def _equal_small(rep: tuple[Storage, str], rv: int, mas: tuple[Storage, str], mv: int, limit: int) -> int | None:
    """The row count when both sides (replica at ``rv``, master at ``mv``) are local tables of at
    most ``limit`` bytes each that delta-rs reads, of flat columns, and equal once sorted by every
    column (no Spark job); None: Spark decides (bigger, other types, NaN, or not equal here)."""
    tables = [_small(where, version, limit) for where, version in ((rep, rv), (mas, mv))]
    if tables[0] is None or tables[1] is None:
        return None
    a, b = tables[0].to_pyarrow_table(), tables[1].to_pyarrow_table()
    if a.schema != b.schema or a.num_rows != b.num_rows or not all(_flat(f.type) for f in a.schema):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    for f in a.schema:
        if pa.types.is_floating(f.type) and any(pc.any(pc.is_nan(t[f.name])).as_py() for t in (a, b)):
            return None
    order = [(name, "ascending") for name in a.column_names]
    same = a.sort_by(order).combine_chunks().equals(b.sort_by(order).combine_chunks())
    return a.num_rows if same else None


def _small(where: tuple[Storage, str], version: int, limit: int) -> Any:
    """delta-rs's table at ``version`` when local, readable by delta-rs and of at most ``limit``
    bytes of data files (its rows not read yet); else None."""
    local = where[0].os_path(where[1])
    if local is None or limit <= 0:
        return None
    from deltalake import DeltaTable

    from .apply import detail

    try:
        dt = DeltaTable(local, version=version)
        return dt if detail(dt)[0] <= limit else None
    except Exception:  # delta-rs cannot read it (a reader feature it lacks; no common base): Spark reads it
        return None


SMALL_BYTES = 64 << 20  # a side's data files at most, for delta-rs to read both into memory and sort them


def _plain(meta: TableMeta) -> bool:
    """True when delta-rs reads the table's rows as Spark does: no column mapping (delta-rs 1.x
    reads a column-mapped table of reader version 2 as NULLs), partitions, deletion vectors or
    TIMESTAMP columns (Spark's INT96, read through nanoseconds)."""
    if meta.partition_columns or meta.deletion_vectors:
        return False
    if meta.column_mapping:
        return False
    return all(f.get("type") != "timestamp" for f in meta.schema.get("fields", []))


def _after(where: tuple[Storage, str], version: int) -> tuple[list[str], bool]:
    """The commits after ``version`` of a replica table that change data or shape and were not
    made by replay (``"version <v> (<operation>)"``), and whether replay committed after it too."""
    from .apply import parse_span

    foreign, replayed = [], False
    for v in list_versions(*where):
        if v <= version:
            continue
        commit = read_commit(where[0], where[1], v)
        if parse_span(commit.user_metadata, None) is not None:
            replayed = True
        elif commit.data_change or commit.metadata is not None:
            foreign.append(f"version {v} ({commit.operation})")
    return foreign, replayed


def _meta(where: tuple[Storage, str], version: int) -> TableMeta | None:
    try:
        return metadata_at(where[0], where[1], version)
    except (OSError, ValueError):
        return None


def _comparable(df: Any, cols: list[str]) -> Any:
    """``df``'s columns ``cols`` as compared: a flat column as it is, a nested one (struct,
    array, map) as its JSON text with NULL fields kept and a map's entries sorted (Spark neither
    hashes nor compares maps, and its hash of an array skips NULL elements)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    types = {f.name: f.dataType for f in df.schema.fields}
    out = []
    for c in cols:
        col, kind = F.col(quote_ident(c)), types.get(c)
        if isinstance(kind, MapType):
            col = F.array_sort(F.map_entries(col))
        if isinstance(kind, (ArrayType, MapType, StructType)):
            col = F.to_json(col, {"ignoreNullFields": "false"})
        out.append(col.alias(c))
    return df.select(*out)


def _digest(df: Any) -> tuple[int, int]:
    """Row count and the sum of each row's ``xxhash64`` over its values and which of them are
    NULL (Spark's hash skips a NULL: without the mask a value in the wrong nullable column
    would hash the same)."""
    from pyspark.sql import functions as F

    cols = [F.col(quote_ident(c)) for c in df.columns]
    row = df.select(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.xxhash64(*cols, *[c.isNull() for c in cols]).cast("decimal(38,0)")).alias("h"),
    ).first()
    return int(row["n"]), int(row["h"] or 0)


def _shape_difference(replica: TableMeta, master: TableMeta) -> str:
    """The parts of the two definitions that differ, named."""
    a, b = replica.shape(), master.shape()
    parts = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(parts) or "(no part named)"
