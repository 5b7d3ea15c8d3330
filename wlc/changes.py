"""Copying staged transactions' change rows from the master's tables into the open batch.

Each version is read with the schema it was written with: Delta's batch change feed reads
with the table's latest schema, which cannot read versions from before a non-additive
schema change (type widening, a replaced table, a dropped or renamed column), so each
read covers a run of adjacent versions that share their read schema (at most
:data:`RUN_VERSIONS`) and is pinned to the run's last version with ``versionAsOf`` (Delta's
``legacy`` batch schema mode, on a session of capture's own). Rows are written as Parquet
partitioned by version and counted while they are written (a Spark ``Observation``): no
row passes through Python.

Where delta-rs reads a table's change feed as Spark does, a run is copied by it instead, with no
Spark job (:mod:`wlc.changes_arrow`, ``capture.deltars``).

What the change feed cannot describe is carried otherwise, loudly, never lost in silence:

* change files removed by VACUUM before capture read them: the table's full image at the
  run's last version (or, when VACUUM took that too, at the next version that can be
  read); the transactions before it carry a *gap* note instead of rows;
* a table dropped before its rows were copied: the records say the rows are lost;
* any other failure reading one table (a corrupt file, a permission error) raises
  :class:`TableUnreadable` for that table only; capture keeps its transactions *pending*
  and retries, the other tables' rows are written.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from wlcore.batch import CHANGE_TYPE, CHANGE_TYPES, VERSION_COLUMN  # noqa: F401 (re-exported)
from wlcore.deltalog import commit_file, list_versions
from wlcore.errors import first_line
from wlcore.names import batch_folder, quote_ident
from wlcore.settings import settings
from wlcore.storage import Storage

log = logging.getLogger("wlc.capture")

RUN_VERSIONS = 64  # versions a change-feed read may cover (each adds four counters to the write's observation)
# Spark and Delta's words for a file that is not there (removed by VACUUM, or by hand)
_MISSING = re.compile(
    r"FileNotFound|FILE_NOT_EXIST|DELTA_CHANGE_DATA_FILE_NOT_FOUND|No such file|does not exist", re.IGNORECASE
)


def _why(missing: str) -> str:
    """What removed the files: log clean-up says so; a file not found is VACUUM's doing."""
    return missing if "log clean-up" in missing else f"VACUUM: {missing}"


class TableUnreadable(Exception):
    """One table's rows could not be read for a reason of that table (a corrupt file, a
    permission error).

    Args:
        table (str): the table's qualified name (kept as ``table``).
        cause (str): why, one line (kept as ``cause``).
    """

    def __init__(self, table: str, cause: str):
        super().__init__(f"{table}: {cause}")
        self.table, self.cause = table, cause


@dataclass
class Written:
    """What :meth:`Copier.write` made of the items: by item index, the rows' path in the
    batch, the counts by change type, why rows are lost, and the tables left unread."""

    rows: dict[int, str] = field(default_factory=dict)
    counts: dict[int, dict[str, int]] = field(default_factory=dict)
    lost: dict[int, str] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # {table: cause}: its items stay pending


def read_shape(meta) -> str:
    """What a change-feed read depends on: column names, types, nullability and physical
    names (column mapping); versions with the same read shape are read together.

    Args:
        meta (TableMeta | None): the table's metadata at a version.

    Returns:
        str: a JSON text, equal for two versions exactly when one read serves both ("" for None).
    """

    def strip(t):
        if isinstance(t, dict):
            if t.get("type") == "struct":
                return [
                    (
                        f["name"],
                        strip(f["type"]),
                        f.get("nullable", True),
                        (f.get("metadata") or {}).get("delta.columnMapping.physicalName"),
                    )
                    for f in t["fields"]
                ]
            return {k: strip(v) for k, v in t.items()}
        return t

    return json.dumps(strip(meta.schema)) if meta is not None else ""


class Copier:
    """Copies change rows and images of one master database's tables (its own Spark
    session: the change-feed read options it sets never reach the user's).

    Args:
        spark (SparkSession): the master's session (a child session is made from it on first use).
        storage (Storage): the storage holding the master.
        db_path (str): the master's folder.
        note (Callable[[str, str], None] | None): called with ``(table, text)`` when a change-feed
            limit is met (None: a warning on the ``wlc.capture`` logger).
    """

    def __init__(self, spark, storage: Storage, db_path: str, note=None):
        self._base = spark
        self._session = None
        self.storage = storage
        self.db_path = db_path
        self.note = note or (lambda table, text: log.warning("%s: %s", table, text))  # a change-feed limit met
        self.deltars = settings().capture.deltars  # change rows through delta-rs where it reads them as Spark

    @property
    def spark(self):
        """The Spark session change rows are read with: a session of its own (made on first use)
        whose change-feed reads take each version's own schema and skip Delta's retention check."""
        if self._session is None:
            session = self._base.newSession()
            # read a version's changes with its own schema: time travel picks the schema
            session.conf.set("spark.databricks.delta.changeDataFeed.allowTimeTravelOptionsForSchema", "true")
            session.conf.set("spark.databricks.delta.changeDataFeed.defaultSchemaModeForColumnMappingTable", "legacy")
            # Delta refuses to read a version older than delta.deletedFileRetentionDuration, its
            # files gone or not; capture reads what is still there (what VACUUM removed is met
            # as missing files and carried by an image, below)
            session.conf.set(
                "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration", "false"
            )
            self._session = session
        return self._session

    def table_path(self, name: str) -> str:
        """The folder of master table ``name``: ``<db>/<schema>/<table>``.

        Args:
            name (str): ``"schema.table"``.

        Raises:
            ConfigError: the name is not two parts, or a part would leave the database folder.
        """
        from wlcore.names import split_name

        schema, table = split_name(name)
        return Storage.join(self.db_path, schema, table)

    # ------------------------------------------------------------------ writing
    def write(self, staging: str, items: list) -> Written:
        """Write the change rows of ``items`` into ``staging``. Items whose version the change feed
        cannot describe any more are changed in place: ``change`` becomes ``"image"`` or None with
        a ``gap`` note.

        Args:
            staging (str): the open batch's staging folder.
            items (list[Planned]): the staged transactions (:class:`wlcore.batch.Planned`), ascending.

        Returns:
            Written: by item index, the rows' folder and counts, why rows are lost; and the tables
            that could not be read (their items stay pending).
        """
        out = Written()
        by_table: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            if item.change in ("cdf", "image"):
                by_table.setdefault(item.table, []).append(i)
        for table, idx in by_table.items():
            try:
                self._write_table(staging, table, [(i, items[i]) for i in idx], out)
            except TableUnreadable as exc:
                out.unreadable[table] = exc.cause
                for i in idx:
                    out.rows.pop(i, None)
                    out.counts.pop(i, None)
                    self._remove(staging, items[i])
        return out

    def _write_table(self, staging: str, table: str, items: list[tuple[int, Any]], out: Written) -> None:
        force: str | None = None  # a gap before: the next version with data is carried by its image
        k = 0
        while k < len(items):
            i, item = items[k]
            if item.change == "image" or force:
                if force and item.change != "image":
                    item.change, item.gap = "image", force
                done = self._image(staging, table, i, item, out)
                if done and force:
                    self.note(table, f"{force}; the table is carried by its image at version {item.version}")
                force = None if done else (force or item.gap)
                k += 1
                continue
            run = [(i, item)]
            while (
                k + len(run) < len(items)
                and len(run) < RUN_VERSIONS
                and items[k + len(run)][1].change == "cdf"
                and items[k + len(run)][1].version == run[-1][1].version + 1
                and read_shape(items[k + len(run)][1].meta) == read_shape(item.meta)
            ):
                run.append(items[k + len(run)])
            k += len(run)
            missing = self._changes(staging, table, run, out)
            if missing is None:
                continue
            # VACUUM (or log clean-up) removed what the feed needs: the run's last version by its
            # image, a gap before it
            reason = (
                f"the change files of versions {run[0][1].version}..{run[-1][1].version} were removed "
                f"before capture read them ({_why(missing)})"
            )
            for _j, it in run[:-1]:
                it.change, it.gap = None, reason
            j, last = run[-1]
            last.change, last.gap = "image", reason
            if self._image(staging, table, j, last, out):
                self.note(table, f"{reason}; the table is carried by its image at version {last.version}")
            else:
                force = reason
                self.note(
                    table,
                    f"{reason}, and the files of version {last.version} too; the table is carried "
                    "by its image at the next version that can be read",
                )

    def _image(self, staging: str, table: str, i: int, item, out: Written) -> bool:
        """Copy the table's image at ``item.version``, or, when VACUUM removed its files, at
        ``item.stable`` (the last version with the same rows: the ones between change no
        data, e.g. OPTIMIZE); False when those files are gone too (the item then carries a
        gap note and no rows)."""
        from pyspark.sql import Observation, functions as F

        rel = f"images/{batch_folder(table)}/{item.version}"
        uri = self.storage.uri(self.table_path(table))
        tries = [item.version] + ([item.stable] if item.stable is not None and item.stable > item.version else [])
        status = ""
        for version in tries:
            seen = Observation()

            def copy():
                df = self.spark.read.format("delta").option("versionAsOf", version).load(uri)
                cols = item.meta.columns if item.meta else df.columns
                (
                    df.select(*[quote_ident(c) for c in cols])
                    .observe(seen, F.count(F.lit(1)).alias("n"))
                    .write.mode("overwrite")
                    .parquet(self.storage.uri(Storage.join(staging, rel)))
                )

            status = self._read(table, [version], copy, staging, rel)
            if status == "ok":
                out.rows[i] = rel
                out.counts[i] = {"image": int(seen.get["n"])}
                return True
            if status.startswith("lost:"):
                out.lost[i] = status[5:]
                return True
        item.change = None
        item.gap = item.gap or (
            f"the data files of version {item.version} were removed before capture read them ({_why(status[8:])})"
        )
        return False

    def _changes(self, staging: str, table: str, run: list, out: Written) -> str | None:
        """Copy the change feed of a run of versions; None when done (or lost with the
        table), else what is missing (the run's change files were vacuumed)."""
        from pyspark.sql import Observation, functions as F

        first, last = run[0][1], run[-1][1]
        uri = self.storage.uri(self.table_path(table))
        base = f"rows/{batch_folder(table)}"
        for _i, it in run:  # a retried write must not append the same version twice
            self.storage.rm(Storage.join(staging, base, f"{VERSION_COLUMN}={it.version}"))
        counts = self._through_deltars(staging, table, run)
        if counts is not None:
            for i, it in run:
                out.rows[i] = f"{base}/{VERSION_COLUMN}={it.version}"
                out.counts[i] = counts.get(it.version, {})
            return None
        seen = Observation()

        def copy():
            df = (
                self.spark.read.format("delta")
                .option("readChangeFeed", "true")
                .option("startingVersion", first.version)
                .option("endingVersion", last.version)
                .option("versionAsOf", last.version)
                .load(uri)
            )
            version, kind = F.col(VERSION_COLUMN), F.col(CHANGE_TYPE)
            tallies = [
                F.count_if((version == it.version) & (kind == t)).alias(f"{i}/{t}")
                for i, it in run
                for t in CHANGE_TYPES
            ]
            (
                df.select(
                    *[quote_ident(c) for c in last.meta.columns],
                    CHANGE_TYPE,
                    df["_commit_version"].alias(VERSION_COLUMN),
                )
                .observe(seen, *tallies)
                .write.mode("append")
                .partitionBy(VERSION_COLUMN)
                .parquet(self.storage.uri(Storage.join(staging, base)))
            )

        status = self._read(table, [first.version, last.version], copy, staging, None)
        if status.startswith("missing:"):
            for _i, it in run:
                self.storage.rm(Storage.join(staging, base, f"{VERSION_COLUMN}={it.version}"))
            return status[8:]
        if status.startswith("lost:"):
            for i, it in run:
                self.storage.rm(Storage.join(staging, base, f"{VERSION_COLUMN}={it.version}"))
                out.lost[i] = status[5:]
            return None
        tally = seen.get
        for i, it in run:
            out.rows[i] = f"{base}/{VERSION_COLUMN}={it.version}"
            out.counts[i] = {t: int(tally[f"{i}/{t}"]) for t in CHANGE_TYPES if tally[f"{i}/{t}"]}
        return None

    def _through_deltars(self, staging: str, table: str, run: list) -> dict[int, dict[str, int]] | None:
        """The run's change rows copied by delta-rs (:mod:`wlc.changes_arrow`), by version and
        change type; None when Spark copies them: ``capture.deltars`` off, folders not of this
        machine, a commit of the run gone, or a table delta-rs does not read as Spark does."""
        if not self.deltars:
            return None
        path = self.table_path(table)
        local, folder = (
            self.storage.os_path(path),
            self.storage.os_path(Storage.join(staging, f"rows/{batch_folder(table)}")),
        )
        if local is None or folder is None:
            return None
        if not all(self.storage.exists(commit_file(path, it.version)) for _i, it in run):
            return None  # log clean-up: Spark's read tells what is missing
        from . import changes_arrow  # pyarrow: imported by the first copy, not by `wlc status`

        return changes_arrow.copy(local, run[-1][1].meta, run[0][1].version, run[-1][1].version, folder)

    def _read(self, table: str, versions: list[int], read, staging: str, rel: str | None) -> str:
        """Run ``read()``: ``"ok"``; ``"lost:<cause>"`` when the table was dropped (its
        commits are gone); ``"missing:<what>"`` when files of those versions are gone
        (VACUUM). Raises :class:`TableUnreadable` for any other failure of this table."""
        path = self.table_path(table)

        def gone() -> str | None:
            missing = [v for v in versions if not self.storage.exists(commit_file(path, v))]
            if not missing:
                return None
            if list_versions(self.storage, path):  # the table is there: log clean-up removed the commit
                return "missing:" + (
                    f"the commit of version {missing[0]} was removed by log clean-up (delta.logRetentionDuration)"
                )
            return "lost:" + (
                f"table {table} was dropped (its Delta log is gone) before capture copied the change "
                f"rows of its version {missing[0]}; they no longer exist anywhere"
            )

        cause = gone()
        if cause:
            return cause
        try:
            read()
        except Exception as exc:  # noqa: BLE001 (Py4JJavaError, AnalysisException...: classified below)
            if rel is not None:
                self.storage.rm(Storage.join(staging, rel))
            cause = gone()
            if cause:
                return cause
            text = str(exc)
            if _MISSING.search(text):
                return "missing:" + first_line(exc)
            raise TableUnreadable(table, f"{type(exc).__name__}: {first_line(exc)}") from exc
        return "ok"

    def _remove(self, staging: str, item) -> None:
        if item.version is None:
            return
        self.storage.rm(Storage.join(staging, f"rows/{batch_folder(item.table)}/{VERSION_COLUMN}={item.version}"))
        self.storage.rm(Storage.join(staging, f"images/{batch_folder(item.table)}/{item.version}"))
