"""Reading a master's published logs in order, for replay: which batches, and are they whole.

Every problem found here belongs to a *batch*, not to one transaction: a batch missing
from the sequence, a missing or damaged manifest, a folder holding another batch's
manifest (swapped or copied folders), another database's batch, or transaction ids that
do not continue where the previous batch ended. They raise :class:`LogError` naming the
batch and what is wrong; replay stores it, and ``accept()`` refuses it (skipping an intact
transaction would not repair the logs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

from wlcore import batch as batchfmt
from wlcore.batch import Manifest
from wlcore.errors import BatchError
from wlcore.storage import Storage

from .plan import Target


class LogError(Exception):
    """A batch of the logs is missing, damaged or out of place.

    Args:
        batch (int): the batch's number (kept as ``batch``).
        cause (str): what is wrong, with the fix (kept as ``cause``; the message).
    """

    def __init__(self, batch: int, cause: str):
        super().__init__(cause)
        self.batch, self.cause = batch, cause


@dataclass
class Batch:
    """A published level-0 batch as replay reads it: its ``number``, folder ``path`` and
    checked ``manifest``."""

    number: int
    path: str
    manifest: Manifest


def read_batches(
    storage: Storage,
    logs: str,
    master: str,
    dbid: str,
    next_batch: int,
    tick: int,
    target: Target,
    read: Mapping[str, Manifest] | None = None,
) -> Iterator[Batch]:
    """Yield the published batches from ``next_batch`` on, in order, each checked.

    Args:
        storage: the filesystem of the log folder.
        logs: the master's log folder.
        master: the master's database name (batch folders are ``<master>_<12 digits>``).
        dbid: the master's database id the replica follows.
        next_batch: first batch number to read.
        tick: the last transaction the replica handled; the first batch must hold ``tick + 1``.
        target: stop reading once a batch reaches it (a damaged batch past the target
            does not stop a point-in-time replay before it).
        read: manifests already read and checked in this call, by batch folder (a new replica's
            path walk, :meth:`wlr.route.Route.take_walked`); the others are read here.

    Raises:
        LogError: a batch is missing, unreadable, misplaced, foreign or breaks the
            sequence of transaction ids; checked before anything of it is applied.
    """
    if not storage.isdir(logs):
        raise LogError(
            next_batch,
            f"the log folder {logs} is not there (unmounted, moved or deleted?); put it back where wlc.config says",
        )
    expected_batch, expected_txn = next_batch, tick + 1
    for number, path in batchfmt.list_batches(storage, logs, master, next_batch):
        if number != expected_batch:
            raise LogError(
                expected_batch,
                f"batch {expected_batch} is missing from {logs} (batch {number} "
                "follows it): the logs have a gap; restore the missing batch from a copy",
            )
        try:
            manifest = read[path] if read and path in read else batchfmt.read_manifest(storage, path)
        except BatchError as exc:
            raise LogError(number, f"batch {number}: {exc}") from None
        if (manifest.database, manifest.batch) != (master, number):
            raise LogError(
                number,
                f"batch {number}: its folder holds the manifest of batch {manifest.batch} of "
                f"{manifest.database!r} (a batch folder copied or renamed?); put the right batch back",
            )
        if manifest.dbid != dbid:
            raise LogError(
                number,
                f"batch {number} belongs to database id {manifest.dbid}, not {dbid} (the logs of another master?)",
            )
        ids = [t.txn for t in manifest.txns]
        if ids and ids != list(range(ids[0], ids[0] + len(ids))):
            raise LogError(number, f"batch {number}: its transaction ids are not consecutive ({ids[:6]}...)")
        # the first batch holds tick + 1 (or ends at tick: a crash between saving tick and batches)
        if ids and not (ids[0] <= expected_txn <= ids[-1] + 1 if number == next_batch else ids[0] == expected_txn):
            raise LogError(
                number,
                f"batch {number} holds transactions {ids[0]}-{ids[-1]} but {expected_txn} was "
                "expected: a batch is missing, duplicated or out of order",
            )
        if ids:
            expected_txn = ids[-1] + 1
        yield Batch(number, path, manifest)
        expected_batch += 1
        if reaches(manifest, target):
            return


def reaches(manifest: Manifest, target: Target) -> bool:
    """True when ``manifest`` holds the target or passes it (later batches are not needed):
    :meth:`wlcore.target.Target.reached_by`.

    Args:
        manifest (Manifest): a batch's manifest (its last transaction and watermark).
        target (Target): the replay target.
    """
    return target.reached_by(manifest.last_txn if manifest.txns else None, manifest.watermark)


def manifest_of(storage: Storage, logs: str, master: str, number: int | None) -> Manifest | None:
    """The manifest of batch ``number`` when it is there and intact.

    Args:
        storage (Storage): the storage holding the logs.
        logs (str): the log folder.
        master (str): the master's name (the batches' name prefix).
        number (int | None): the level-0 batch number (None: none).

    Returns:
        Manifest | None: None when ``number`` is None or the batch is missing or damaged.
    """
    if number is None:
        return None
    path = Storage.join(logs, batchfmt.batch_name(master, number))
    try:
        return batchfmt.read_manifest(storage, path)
    except BatchError:
        return None
