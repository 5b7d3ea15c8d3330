"""The conformance suite's machinery: scenarios, what they may do, and the comparison of a
replica table with its master table.

A scenario is a function of a :class:`Ctx`: it writes one master table (its own) with Spark
SQL by path or by name, the DataFrame writer, the ``DeltaTable`` API or delta-rs. Every
statement is captured by the ``live`` master as soon as it commits (``ctx.sql`` and
``ctx.step()`` flush); the ``late`` master captures a copy of the same table long after
(see ``conftest.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from tests.integration.helpers import local, table_definition
from wlcore.collapse import canon
from wlcore.names import quote_ident

MODES = ("live", "late")
SCHEMA = "c"  # the schema of every scenario's table, in both masters
# scenarios run in threads sharing one Spark session: a session setting switched for one
# statement is switched under this lock, so no other thread switches it back meanwhile
_SESSION_SETTING = threading.Lock()


@dataclass
class Scenario:
    """One master table written one way. ``before``: statements captured before capture
    goes away (the table is known to capture, it then lags). ``rs_reads``: delta-rs can
    read the table (its reader features are ones delta-rs supports); the replica must then
    be readable too."""

    name: str
    run: Callable[["Ctx"], None]
    rs_reads: bool = True
    doc: str = ""
    before: Callable[["Ctx"], None] | None = None


@dataclass
class Ctx:
    spark: object
    master: object  # wlc.Master
    mode: str
    schema: str
    table: str
    farm: str
    notes: list = field(default_factory=list)

    @property
    def path(self) -> str:
        """The master table's folder."""
        return os.path.join(self.farm, self.master.dbname, self.schema, self.table)

    @property
    def ref(self) -> str:
        """``delta.`<path>``` for SQL by path."""
        return f"delta.`{self.path}`"

    @property
    def name(self) -> str:
        """``schema.table`` for SQL by name (the schema is registered at the master's folder)."""
        return f"{self.schema}.{self.table}"

    def sql(self, text: str):
        """Run ``text`` (``{t}``: the table by path, ``{n}``: by name, ``{p}``: its folder)."""
        out = self.spark.sql(text.format(t=self.ref, n=self.name, p=self.path))
        self.step()
        return out

    def vacuum(self) -> None:
        """``VACUUM`` the table with no retention (Delta's retention check off for it alone)."""
        check = "spark.databricks.delta.retentionDurationCheck.enabled"
        with _SESSION_SETTING:
            self.spark.conf.set(check, "false")
            try:
                self.spark.sql(f"VACUUM {self.ref} RETAIN 0 HOURS")
            finally:
                self.spark.conf.set(check, "true")
        self.step()

    def step(self) -> None:
        """Capture what was just committed (the live master); the late master captures later."""
        if self.mode == "live":
            self.master.flush()

    def aside(self, name: str) -> str:
        """A folder outside the master database for this scenario's own use."""
        path = os.path.join(self.farm, f"aside_{self.mode}", f"{self.table}_{name}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path


def bring_whole(ctx, source: str) -> None:
    """The table folder ``source`` moved into the master (one rename: it appears whole)."""
    os.rename(source, ctx.path)
    ctx.step()


def bring_commit_by_commit(ctx, source: str) -> None:
    """``source``'s data files first (unreferenced, Delta does not see them), then each commit
    file in version order, captured after each."""
    log = os.path.join(source, "_delta_log")
    for root, _dirs, files in os.walk(source):
        if root.startswith(log):
            continue
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), source)
            os.makedirs(os.path.dirname(os.path.join(ctx.path, rel)), exist_ok=True)
            shutil.copy2(os.path.join(root, name), os.path.join(ctx.path, rel))
    os.makedirs(os.path.join(ctx.path, "_delta_log"), exist_ok=True)
    for name in sorted(n for n in os.listdir(log) if n.endswith(".json") and n[:20].isdigit()):
        aside = os.path.join(ctx.path, "_delta_log", "." + name + ".tmp")
        shutil.copy2(os.path.join(log, name), aside)
        os.rename(aside, os.path.join(ctx.path, "_delta_log", name))  # a commit appears whole
        ctx.step()


def content(spark, path: str) -> Counter:
    """The table's rows as a multiset of canonical JSON texts (maps, VARIANT, NaN and -0.0 exact)."""
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(local(path))
    cols = [canon(df[quote_ident(f.name)], f.dataType).alias(f"c{i}") for i, f in enumerate(df.schema.fields)]
    return Counter(r[0] for r in df.select(F.to_json(F.struct(*cols))).collect())


def detail(spark, path: str) -> dict:
    """What DESCRIBE DETAIL says of partitioning and clustering."""
    row = spark.sql(f"DESCRIBE DETAIL delta.`{local(path)}`").collect()[0]
    return {
        "partitionColumns": list(row["partitionColumns"] or []),
        "clusteringColumns": list(row["clusteringColumns"] or []),
    }


def rs_rows(path: str) -> list | None:
    """The table as delta-rs reads it (sorted JSON rows), None when delta-rs refuses it."""
    import deltalake

    try:
        table = deltalake.DeltaTable(local(path)).to_pyarrow_table()
    except Exception:  # noqa: BLE001 (DeltaProtocolError: reader features delta-rs lacks)
        return None
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def describe(spark, path: str, rs_reads: bool) -> dict:
    """What the comparison looks at in one table: content, definition, DESCRIBE DETAIL and
    (``rs_reads``) what delta-rs reads."""
    return {
        "content": content(spark, path),
        "definition": table_definition(path, spark),
        "detail": detail(spark, path),
        "rs": rs_rows(path) if rs_reads else False,
    }


def differences(master: dict, replica: dict) -> list[str]:
    """What differs between a master table and its replica (:func:`describe` of each; []
    when they are equal)."""
    out = []
    want, got = master["content"], replica["content"]
    if want != got:
        out.append(
            f"content: master has {sum(want.values())} rows, replica {sum(got.values())}; only on the master "
            f"{list((want - got).elements())[:3]}, only on the replica {list((got - want).elements())[:3]}"
        )
    d_want, d_got = master["definition"], replica["definition"]
    for key in d_want:
        if d_want[key] != d_got.get(key):
            out.append(f"{key}: master {d_want[key]}, replica {d_got.get(key)}")
    if master["detail"] != replica["detail"]:
        out.append(f"DESCRIBE DETAIL: master {master['detail']}, replica {replica['detail']}")
    m, r = master["rs"], replica["rs"]
    if m is not False:
        if m is None:
            out.append("delta-rs cannot read the master table (mark the scenario rs_reads=False)")
        elif r is None:
            out.append("delta-rs reads the master table but not the replica's")
        elif len(m) != len(r):
            out.append(f"delta-rs reads {len(m)} rows on the master, {len(r)} on the replica")
    return out
