"""Making and reshaping replica tables as the master's transaction records define them.

A ``create`` makes the table with its whole definition (:func:`wlcore.tabledef.create_sql`); an
``alter`` applies the ALTER TABLE operations capture recorded (:mod:`wlcore.tabledef`), each
skipped when a resumed replay finds it done; a full image that changes the table's columns
(a replaced table, an ``overwriteSchema`` write) replaces the table by its definition and
the image's rows. After each, the replica table's definition is compared with the
master's, so a change Delta would carry out otherwise than on the master stops replay
loudly instead of leaving a table that looks right and is not.

Every commit of a transaction but its last is a *part* commit (tag ``...:<txn>:part``); the
caller's final commit ends it (see :mod:`wlr.apply`).
"""

from __future__ import annotations

import json

from wlcore import tabledef
from wlcore.deltalog import TableMeta, read_commit
from wlcore.faults import crash_point
from wlcore.tabledef import create_sql, definition

from .merge import ApplyError


class TableDDL:
    """The DDL side of an :class:`wlr.apply.Applier` (it owns one; this one uses its Spark
    session, tags and table inspection).

    Args:
        applier (Applier): the applier that owns it.
    """

    def __init__(self, applier):
        self.applier = applier

    @property
    def spark(self):
        """The applier's SparkSession (the one of the thread this DDL runs in)."""
        return self.applier.spark

    def create(self, name: str, ref: str, meta: TableMeta, part: str) -> None:
        """Create the replica table ``name`` at ``ref`` as ``meta`` defines it (CHECK
        constraints already there, after a resumed create, are not added again).

        Args:
            name (str): the table, ``schema.table``.
            ref (str): the table as SQL names it (``delta.`<uri>```).
            meta (TableMeta): the definition the create record carries.
            part (str): the replay tag of its commits (a part commit: the transaction's final
                commit comes after).
        """
        have = self.applier.tables.current_meta(name)
        with self.applier.tagged(part):
            for stmt in create_sql(ref, meta):
                if (
                    " ADD CONSTRAINT " in stmt
                    and have is not None
                    and _constraint_of(stmt) in {k.lower() for k in have.constraints}
                ):
                    continue
                self.spark.sql(stmt)

    def alter(self, name: str, ref: str, meta: TableMeta, ops: list | None, part: str) -> None:
        """Bring the replica table ``name`` to the definition ``meta`` by ALTER TABLE statements,
        skipping the operations already done (a resumed replay), then check the result.

        Args:
            name (str): the table, ``schema.table``.
            ref (str): the table as SQL names it (``delta.`<uri>```).
            meta (TableMeta): the definition after the change.
            ops (list | None): the recorded ALTER operations (:mod:`wlcore.tabledef`); None: a record of
                an older capture, the change is worked out by name from the replica's definition.
            part (str): the replay tag of its commits (part commits).

        Raises:
            ApplyError: the change has no ALTER TABLE form, or the table is not defined as ``meta`` after it.
        """
        if ops is None:
            ops = tabledef.diff(self.applier.tables.current_meta(name), meta, by_name=True)
            if ops is None:
                raise ApplyError(f"the change of table {name}'s definition has no ALTER TABLE form on the replica")
        # the features a record of an older capture does not list (a record that lists them switches
        # on exactly the master's first: a preview name where the master has one)
        needed = tabledef.features_needed(ops) if meta.features is None else {}
        if needed:
            ops = [{"op": "set_properties", "properties": needed}, *ops]
        with self.applier.tagged(part):
            for op in ops:
                if tabledef.done(op, self.applier.tables.current_meta(name)):
                    continue
                for stmt in tabledef.statements(ref, [op]):
                    self.spark.sql(stmt)
        self.check(name, meta)

    def replace(self, name: str, ref: str, rec, rows, meta: TableMeta, write_rows) -> bool:
        """Replace the replica table's definition and content by ``meta`` and the image ``rows``:
        REPLACE TABLE when its columns change (the rows then land in an idempotent commit of their
        own), else the rows overwrite it and ALTER operations bring the rest of its definition along.

        Args:
            name (str): the table, ``schema.table``.
            ref (str): the table as SQL names it (``delta.`<uri>```).
            rec (TxnRecord): the image's transaction record.
            rows (DataFrame): the image's rows (the replica's row filter applied).
            meta (TableMeta): the definition the image carries.
            write_rows (Callable[[DataFrame, bool], None]): ``write_rows(df, final)`` writes the rows
                with Delta's idempotent marker, as the transaction's final commit or a part commit.

        Returns:
            bool: True when the rows' write was the transaction's final commit (nothing else to
            change); False: the caller makes the final commit.

        Raises:
            ApplyError: the table is not defined as ``meta`` afterwards.
        """
        old = self.applier.tables.current_meta(name)
        ops = tabledef.diff(old, meta, by_name=True) if old is not None else None
        reshape = ops is None or any(op["op"] in tabledef.COLUMN_OPS for op in ops)
        part = self.applier.part(rec)
        if reshape:
            if not self.written(name, rec.txn):
                with self.applier.tagged(part):
                    for stmt in create_sql(ref, meta):
                        if stmt.startswith("CREATE TABLE IF NOT EXISTS "):
                            # REPLACE TABLE: a path's table (CREATE OR REPLACE refuses another schema there)
                            self.spark.sql("REPLACE TABLE " + stmt[len("CREATE TABLE IF NOT EXISTS ") :])
                        break
                crash_point("replay.image_reshaped")
                write_rows(rows, False)
            crash_point("replay.image_overwritten")
            self.alter(
                name,
                ref,
                meta,
                [
                    op
                    for op in tabledef.diff(self.applier.tables.current_meta(name), meta, by_name=True) or []
                    if op["op"] in ("add_constraint", "drop_constraint")
                ],
                part,
            )
            return False
        if not ops and not self.applier.tables.resuming(name, rec.txn):
            write_rows(rows, True)
            return True
        if not self.written(name, rec.txn):
            write_rows(rows, False)
        crash_point("replay.image_overwritten")
        self.alter(name, ref, meta, ops, part)
        return False

    def written(self, name: str, txn: int) -> bool:
        """True when the table's log already holds the rows' commit of ``txn`` (Delta's idempotent
        marker ``txnAppId``/``txnVersion``) after its newest final replay commit.

        Args:
            name (str): the table, ``schema.table``.
            txn (int): the transaction.
        """
        path = self.applier.tables.table_path(name)
        from wlcore.deltalog import list_versions

        for v in reversed(list_versions(self.applier.storage, path)):
            commit = read_commit(self.applier.storage, path, v)
            if commit.txns.get(self.applier.app_id) == txn:
                return True
            found = self.applier.tables.tag_at(path, v)
            if found is None or found[0] != txn:
                return False
        return False

    def check(self, name: str, meta: TableMeta) -> None:
        """Raise ApplyError when the replica table ``name`` is not defined as ``meta``
        (:func:`wlcore.tabledef.definition`).

        Args:
            name (str): the table, ``schema.table``.
            meta (TableMeta): the definition it must have.

        Raises:
            ApplyError: the definitions differ; the message names each difference.
        """
        have = self.applier.tables.current_meta(name)
        want, got = definition(meta), definition(have) if have is not None else None
        if got is not None and "features" not in want:
            got.pop("features", None)  # a record of an older capture does not say the master's features
        if want != got:
            raise ApplyError(
                f"table {name} on the replica is not defined as on the master after its change of "
                f"definition: {_difference(want, got)}"
            )


def _constraint_of(stmt: str) -> str:
    return stmt.split(" ADD CONSTRAINT ", 1)[1].split(" CHECK ", 1)[0].strip("`").replace("``", "`").lower()


def _difference(want: dict, got: dict | None) -> str:
    if got is None:
        return "the table is missing"
    parts = []
    for key in want:
        if want[key] != got.get(key):
            parts.append(
                f"{key}: master {json.dumps(want[key], sort_keys=True)[:300]}, "
                f"replica {json.dumps(got.get(key), sort_keys=True)[:300]}"
            )
    return "; ".join(parts)
