"""What a restore (:mod:`wlr.restore`) did, for people: :class:`RestoredTable` and the parts
of a table's definition it carried (:func:`carried`)."""

from __future__ import annotations

from dataclasses import dataclass

from wlcore.deltalog import TableMeta
from wlcore.tabledef import CARRIED, CONSTRAINT_PREFIX, constraints

_FEATURES = {
    "delta.enableChangeDataFeed": "change feed",
    "delta.columnMapping.mode": "column mapping",
    "delta.enableTypeWidening": "type widening",
    "delta.enableDeletionVectors": "deletion vectors",
    "delta.enableRowTracking": "row tracking",
    "delta.enableInCommitTimestamps": "In-Commit Timestamps",
}


# the protocol's table features the lines above say already (by a property, a constraint, a column)
_SAID_BY_PROPERTIES = (
    "changeDataFeed",
    "columnMapping",
    "typeWidening",
    "deletionVectors",
    "rowTracking",
    "checkConstraints",
    "generatedColumns",
    "identityColumns",
)


@dataclass(frozen=True)
class RestoredTable:
    """What :meth:`wlr.Replica.restore_table` did.

    Attributes:
        table: the master table made, ``"schema.table"``; ``master``: the master database;
        path: its folder (URI); ``version``: its Delta version after the restore;
        commits: Delta commits the restore made; ``steps``: what each was (``create`` or
        ``replace``, ``constraint <name>``, ``insert``, ``sync identity <column>``);
        rows: rows written; ``replica``, ``source``: the replica and its table read;
        tick: the replica's consistent tick read; ``source_version``: the replica table's
        Delta version there; ``carried``: what of the definition came along, one text each;
        replaced: what an existing table held before (``replace=True``), else None;
        notes: what a reader should know (the replica carries only some rows, schema ``tmp``).
    """

    table: str
    master: str
    path: str
    version: int
    commits: int
    rows: int
    replica: str
    source: str
    tick: int
    source_version: int
    carried: tuple[str, ...]
    steps: tuple[str, ...] = ()
    replaced: str | None = None
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """The restore for people: a line each for what was made, read, carried and replaced."""
        out = [
            f"restored {self.source} of replica {self.replica} into master {self.master} as {self.table}",
            f"  read:     transaction {self.tick} of {self.replica} (Delta version {self.source_version} of "
            f"{self.source})",
            f"  made:     {self.path}, {self.rows} rows, Delta version {self.version} ({self.commits} commits: "
            f"{', '.join(self.steps)})",
        ]
        if self.replaced:
            out.append(f"  replaced: {self.replaced}")
        out += [f"  {'carried:' if i == 0 else '':<8}  {c}" for i, c in enumerate(self.carried)]
        out += [f"  note:     {n}" for n in self.notes]
        return out


def carried(meta: TableMeta, made: TableMeta | None = None) -> list[str]:
    """What of a definition a restore carries, one text each (columns and their details,
    partitioning, clustering, comment, properties, constraints, table features).

    Args:
        meta (TableMeta): the replica table's definition.
        made (TableMeta | None): the table made in the master: the features it has beyond
            ``meta`` (capture's) are named too (None: none).

    Returns:
        list[str]: the texts.
    """
    shape = meta.shape()
    cols = shape["columns"]
    details = []
    for label, test in (
        ("NOT NULL", lambda c: not c["nullable"]),
        ("generated", lambda c: "generated" in c),
        ("identity", lambda c: "identity" in c),
        ("defaults", lambda c: "default" in c),
        ("comments", lambda c: "comment" in c),
    ):
        names = [c["name"] for c in cols if test(c)]
        if names:
            details.append(f"{label} {', '.join(names)}")
    out = [f"{len(cols)} columns" + (f" ({'; '.join(details)})" if details else "")]
    if shape["partitioning"]:
        out.append("partitioned by " + ", ".join(shape["partitioning"]))
    if shape["clustering"]:
        out.append("clustered by " + ", ".join(".".join(p) for p in shape["clustering"]))
    if shape["comment"]:
        out.append("table comment")
    props = {k: v for k, v in shape["properties"].items() if not k.startswith(CONSTRAINT_PREFIX) and k not in CARRIED}
    if props:
        out.append("properties " + ", ".join(f"{k}={v}" for k, v in props.items()))
    checks = constraints(meta.configuration)
    if checks:
        out.append("constraints " + ", ".join(f"{k} CHECK ({v})" for k, v in checks.items()))
    feats = [label for key, label in _FEATURES.items() if key in shape["properties"]]
    if feats:
        out.append("table features " + ", ".join(feats))
    named = set(_SAID_BY_PROPERTIES) | ({"allowColumnDefaults"} if any("default" in c for c in cols) else set())
    supported = [f for f in shape.get("features", []) if f not in named]
    if supported:
        out.append("supported table features " + ", ".join(supported))
    if made is not None:
        extra = [
            label
            for key, label in _FEATURES.items()
            if _on(made.configuration.get(key)) and not _on(meta.configuration.get(key))
        ]
        if extra:
            out.append("switched on for capture (capture.table_features): " + ", ".join(extra))
    return out


def _on(value: str | None) -> bool:
    return value is not None and str(value).lower() not in ("false", "none")
