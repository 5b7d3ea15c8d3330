"""What replay reads from a transaction record (:class:`wlcore.batch.TxnRecord`): the table
definition a create, alter or image carries, and the folder of its change rows or image. A
record that lacks what its kind needs comes from a damaged batch and is refused by name.
"""

from __future__ import annotations

from wlcore.batch import TxnRecord
from wlcore.deltalog import TableMeta

from .merge import ApplyError


def definition(rec: TxnRecord) -> TableMeta:
    """The table definition a create, alter or image record carries.

    Args:
        rec (TxnRecord): the transaction record.

    Returns:
        TableMeta: the definition after the transaction.

    Raises:
        ApplyError: the record carries none (its batch was written wrong or damaged).
    """
    if not rec.meta:
        raise ApplyError(
            f"transaction {rec.txn} ({rec.ddl or rec.change} of {rec.table}) carries no table "
            "definition: its batch is damaged; restore the batch, or skip the transaction with wlr.accept()"
        )
    return TableMeta.from_json(rec.meta)


def rows_of(rec: TxnRecord) -> str:
    """The folder, inside its batch, of the change rows or image a record carries.

    Args:
        rec (TxnRecord): the transaction record.

    Returns:
        str: the folder relative to the batch (``rows/<schema.table>/...``).

    Raises:
        ApplyError: the record has none (its batch was written wrong or damaged).
    """
    if not rec.rows:
        raise ApplyError(
            f"transaction {rec.txn} ({rec.change} of {rec.table}) carries no rows: its batch is "
            "damaged; restore the batch, or skip the transaction with wlr.accept()"
        )
    return rec.rows
