"""A table's shape as its Delta ``metaData`` and ``protocol`` actions state it (pure, no I/O):
schema, partitioning, liquid clustering columns, table properties and comment, and the table
features its protocol lists, as capture cursors, batch records and snapshots carry it
(:meth:`TableMeta.to_json`). Read from a table's log by :mod:`wlcore.deltalog`, or from a
checkpoint by Delta Kernel (:mod:`wlcore.kernel`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

# Delta's legacy protocol versions and the table features each one implies (Delta's protocol:
# "Table Features"; a protocol with writer version 7 or reader version 3 lists them instead)
_LEGACY_WRITER = (
    (2, ("appendOnly", "invariants")),
    (3, ("checkConstraints",)),
    (4, ("changeDataFeed", "generatedColumns")),
    (5, ("columnMapping",)),
    (6, ("identityColumns",)),
)
KEY_PROPERTY = "wlc.key"  # the table property naming a replicated table's key columns
# Delta's primitive types (and decimal(p,s)): columns delta-rs reads and writes as Spark does
FLAT_TYPES = frozenset(
    {
        "boolean",
        "byte",
        "short",
        "integer",
        "long",
        "float",
        "double",
        "string",
        "binary",
        "date",
        "timestamp",
        "timestamp_ntz",
    }
)


def is_relevant_property(key: str) -> bool:
    """True for a property replication carries (:func:`wlcore.tabledef.is_replicated_property`).

    Args:
        key (str): a table property's name (``delta.enableChangeDataFeed``, ``wlc.key``).

    Returns:
        bool: replicas get the property.
    """
    from .tabledef import is_replicated_property

    return is_replicated_property(key)


@dataclass(frozen=True)
class TableMeta:
    """A table's shape as its Delta ``metaData`` action states it."""

    schema_json: str
    partition_columns: tuple[str, ...]
    configuration: dict[str, str]
    table_id: str = ""
    # liquid clustering: the ``delta.clustering`` domain's columns as physical name paths
    # (column mapping), None for a table that never had clustering columns
    clustering: tuple[tuple[str, ...], ...] | None = None
    description: str | None = None  # the table comment
    # the table features the protocol lists (legacy versions' implied ones too), sorted; None: not
    # known (a record of an older capture, a log whose protocol only a checkpoint holds)
    features: tuple[str, ...] | None = None

    @classmethod
    def from_action(cls, action: dict[str, Any], clustering: tuple[tuple[str, ...], ...] | None = None) -> "TableMeta":
        """The metadata of a Delta ``metaData`` action (Delta's transaction log protocol).

        Args:
            action (dict[str, Any]): the action's body (``schemaString``, ``partitionColumns``,
                ``configuration``, ``id``, ``description``).
            clustering (tuple[tuple[str, ...], ...] | None): the ``delta.clustering`` domain's
                columns, read apart (physical name paths; None: none).

        Returns:
            TableMeta: the metadata.
        """
        return cls(
            schema_json=action.get("schemaString") or '{"type":"struct","fields":[]}',
            partition_columns=tuple(action.get("partitionColumns") or ()),
            configuration=dict(action.get("configuration") or {}),
            table_id=action.get("id") or "",
            clustering=clustering,
            description=action.get("description"),
        )

    def with_clustering(self, clustering: tuple[tuple[str, ...], ...] | None) -> "TableMeta":
        """The same metadata with other clustering columns.

        Args:
            clustering (tuple[tuple[str, ...], ...] | None): the ``delta.clustering`` domain's columns
                (physical name paths; None: none).

        Returns:
            TableMeta: a new object; this one is unchanged.
        """
        return replace(self, clustering=clustering)

    def with_features(self, features: tuple[str, ...] | None) -> "TableMeta":
        """The same metadata with other table features (:func:`protocol_features`).

        Args:
            features (tuple[str, ...] | None): the features, sorted (None: not known).

        Returns:
            TableMeta: a new object; this one is unchanged.
        """
        return replace(self, features=features)

    @property
    def clustering_columns(self) -> list[list[str]]:
        """Clustering columns as logical name paths (``[["k"], ["s", "a"]]``), ``[]`` for none."""
        if not self.clustering:
            return []
        from .tabledef import logical_path

        return [logical_path(self.schema, list(p)) for p in self.clustering]

    @property
    def schema(self) -> dict:
        """The Delta schema as a dict (the parsed ``schemaString``)."""
        return json.loads(self.schema_json)

    @property
    def columns(self) -> list[str]:
        """The top-level column names, in order."""
        return [f["name"] for f in self.schema.get("fields", [])]

    @property
    def properties(self) -> dict[str, str]:
        """Replicated properties: user properties, CHECK constraints (``delta.constraints.*``)
        and the carried table features (:data:`wlcore.tabledef.CARRIED`)."""
        return {k: v for k, v in sorted(self.configuration.items()) if is_relevant_property(k)}

    @property
    def constraints(self) -> dict[str, str]:
        """The CHECK constraints: ``{name: expression}`` from the ``delta.constraints.*`` properties."""
        return {
            k[len("delta.constraints.") :]: v for k, v in self.properties.items() if k.startswith("delta.constraints.")
        }

    @property
    def key_columns(self) -> list[str]:
        """Columns named by the ``wlc.key`` table property (comma separated), or ``[]``."""
        raw = self.configuration.get(KEY_PROPERTY, "")
        return [c.strip() for c in raw.split(",") if c.strip()]

    @property
    def change_feed(self) -> bool:
        """True when the table's change data feed is on (``delta.enableChangeDataFeed``)."""
        return self.configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"

    def shape(self) -> dict:
        """What replication carries (:func:`wlcore.tabledef.definition`): columns with types,
        nullability, comments, generation, identity and defaults; partitioning; clustering;
        replicated properties and constraints."""
        from .tabledef import definition

        return definition(self)

    def to_json(self) -> dict:
        """The metadata as capture cursors hold it (clustering and comment only when set)."""
        out: dict[str, Any] = {
            "schema": self.schema_json,
            "partition_columns": list(self.partition_columns),
            "configuration": self.configuration,
            "id": self.table_id,
        }
        if self.clustering is not None:
            out["clustering"] = [list(p) for p in self.clustering]
        if self.description is not None:
            out["description"] = self.description
        if self.features is not None:
            out["features"] = list(self.features)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "TableMeta":
        """The metadata in ``data`` (:meth:`to_json`'s form).

        Args:
            data (dict): ``schema`` (the schema JSON text), ``partition_columns``,
                ``configuration``, ``id``, and ``clustering``, ``description``, ``features`` when set.

        Returns:
            TableMeta: the metadata.

        Raises:
            KeyError: ``schema`` is missing.
        """
        clustering = data.get("clustering")
        return cls(
            data["schema"],
            tuple(data.get("partition_columns") or ()),
            dict(data.get("configuration") or {}),
            data.get("id", ""),
            tuple(tuple(p) for p in clustering) if clustering is not None else None,
            data.get("description"),
            tuple(str(f) for f in data["features"]) if data.get("features") is not None else None,
        )


def protocol_features(protocol: dict[str, Any]) -> tuple[str, ...]:
    """The table features a Delta ``protocol`` action gives a table: ``readerFeatures`` and
    ``writerFeatures``, and those its legacy versions imply (writer 2: ``appendOnly``,
    ``invariants``; 3: ``checkConstraints``; 4: ``changeDataFeed``, ``generatedColumns``; 5:
    ``columnMapping``; 6: ``identityColumns``; reader 2: ``columnMapping``), as Delta's protocol
    defines them.

    Args:
        protocol (dict[str, Any]): the action's body (``minReaderVersion``, ``minWriterVersion``,
            ``readerFeatures``, ``writerFeatures``).

    Returns:
        tuple[str, ...]: the feature names, sorted.
    """
    out = set(protocol.get("readerFeatures") or ()) | set(protocol.get("writerFeatures") or ())
    writer = int(protocol.get("minWriterVersion") or 1)
    reader = int(protocol.get("minReaderVersion") or 1)
    if writer < 7:
        for version, implied in _LEGACY_WRITER:
            if writer >= version:
                out.update(implied)
    if reader == 2:
        out.add("columnMapping")
    return tuple(sorted(out))


def clustering_of(configuration: str | None) -> tuple[tuple[str, ...], ...] | None:
    """The columns of a ``delta.clustering`` domain's configuration JSON.

    Args:
        configuration (str | None): the domain's ``configuration`` text (None: the domain was removed).

    Returns:
        tuple[tuple[str, ...], ...] | None: ``clusteringColumns`` as physical name paths; None when removed.
    """
    if configuration is None:
        return None
    cols = json.loads(configuration or "{}").get("clusteringColumns") or []
    return tuple(tuple(p) for p in cols)


def delta_rs_refusal(
    meta: TableMeta,
    protocol: Any,
    reader_features: frozenset[str],
    writer_features: frozenset[str],
    writer_versions: frozenset[int],
) -> str | None:
    """Why delta-rs may not handle a table as Spark does, in what capture's reads and replay's
    writes both need: reader version 1 or 3 with only ``reader_features``, a writer version in
    ``writer_versions`` with only ``writer_features``, no partitioning, no column mapping, and
    flat columns (:data:`FLAT_TYPES` and decimals). Each side adds its own checks.

    Args:
        meta (TableMeta): the table's metadata.
        protocol: delta-rs's ``ProtocolVersions`` of the table at that version.
        reader_features (frozenset[str]): the reader features allowed.
        writer_features (frozenset[str]): the writer features allowed.
        writer_versions (frozenset[int]): the minimum writer versions allowed.

    Returns:
        str | None: the reason, or None.
    """
    if protocol.min_reader_version == 2 or protocol.min_reader_version > 3:
        return f"reader version {protocol.min_reader_version}"
    extra = set(protocol.reader_features or ()) - reader_features
    if extra:
        return f"reader features {sorted(extra)}"
    if protocol.min_writer_version not in writer_versions:
        return f"writer version {protocol.min_writer_version}"
    extra = set(protocol.writer_features or ()) - writer_features
    if extra:
        return f"writer features {sorted(extra)}"
    if meta.partition_columns:
        return "partitioned"
    if meta.configuration.get("delta.columnMapping.mode", "none") != "none":
        return "column mapping"
    for f in meta.schema.get("fields", []):
        kind = f.get("type")
        if not isinstance(kind, str) or not (kind in FLAT_TYPES or kind.startswith("decimal(")):
            return f"column {f.get('name')} of a nested type"
    return None
