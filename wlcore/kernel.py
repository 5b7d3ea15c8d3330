"""A table's metadata at a version through Delta Kernel (``io.delta.kernel``, on Spark's classpath
with delta-spark), for when log clean-up removed the JSON commits that held it and only a
checkpoint (classic, multi-part or v2) records the table's state."""

from __future__ import annotations

from .deltalog import TableMeta, clustering_of, protocol_features


def metadata_at(spark, uri: str, version: int) -> TableMeta:
    """The metadata (schema, partitioning, configuration, id, comment, clustering columns, table features) of
    the Delta table at ``uri`` as of ``version``, read by Delta Kernel from the newest
    checkpoint at or before it and the commits after.

    Args:
        spark (SparkSession): the session whose JVM runs Delta Kernel (and whose Hadoop
            configuration reaches the store).
        uri (str): the table's URI as Spark reads it.
        version (int): the Delta version.

    Returns:
        TableMeta: the metadata at that version.

    Raises:
        Exception: Kernel's, when the version cannot be rebuilt (its commits and checkpoint
            are gone).
    """
    jvm = spark.sparkContext._jvm
    engine = jvm.io.delta.kernel.defaults.engine.DefaultEngine.create(spark.sparkContext._jsc.hadoopConfiguration())
    snapshot = jvm.io.delta.kernel.Table.forPath(engine, uri).getSnapshotAsOfVersion(engine, int(version))
    md = snapshot.getMetadata()
    domain = snapshot.getDomainMetadata("delta.clustering")
    description = md.getDescription()
    protocol = snapshot.getProtocol()
    features = protocol_features(
        {
            "minReaderVersion": protocol.getMinReaderVersion(),
            "minWriterVersion": protocol.getMinWriterVersion(),
            "readerFeatures": [str(f) for f in protocol.getReaderFeatures()],
            "writerFeatures": [str(f) for f in protocol.getWriterFeatures()],
        }
    )
    return TableMeta(
        schema_json=str(md.getSchemaString()),
        partition_columns=tuple(str(c) for c in snapshot.getPartitionColumnNames()),
        configuration={str(k): str(v) for k, v in dict(md.getConfiguration()).items()},
        table_id=str(md.getId()),
        clustering=clustering_of(str(domain.get())) if domain.isPresent() else None,
        description=str(description.get()) if description.isPresent() else None,
        features=features,
    )
