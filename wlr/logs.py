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
from wlcore.master_state import MasterState
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
    published: int | None = None,
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
        published: the level-0 batches the source's ``wlc.config`` says are published (its
            ``batches``, read before this call); None: not known. With it, a replica at most
            :data:`PROBE` batches behind looks its next batches up by name and lists the folder
            only when one it needs is missing (see :func:`numbered`).

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
    for number, path in numbered(storage, logs, master, next_batch, published):
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


def published_batches(mcfg: MasterState) -> int | None:
    """The number of level-0 batches ``mcfg`` (a source's ``wlc.config``) says are published: its
    ``batches``, the next number capture publishes; None when the file does not say."""
    return mcfg.batches if mcfg.has("batches") else None


PROBE = 16
"""At most this many batches behind, replay looks its next level-0 batches up by name."""


def numbered(
    storage: Storage, logs: str, master: str, next_batch: int, published: int | None
) -> Iterator[tuple[int, str]]:
    """The level-0 batches from ``next_batch`` on, ``(number, path)`` ascending, as
    :func:`wlcore.batch.list_batches` lists them, read lazily.

    A replica that follows is one or two batches behind a log that may hold tens of thousands:
    listing the whole folder every round would make each round cost as much as the log is long.
    When the source's ``wlc.config`` says at most :data:`PROBE` batches are left to read, each
    is looked up by its name (one ``stat``, or a request on an object store) until one is missing
    at or past what the config says is published (capture publishes a batch before it counts it
    there, a shipped copy writes its config after its batches). A batch missing below that count
    lists the folder, so that a gap is named as it always was, from the batches found after it.

    Args:
        storage (Storage): the filesystem of the log folder.
        logs (str): the log folder.
        master (str): the master's database name.
        next_batch (int): the first batch number wanted.
        published (int | None): the number of level-0 batches published, from ``wlc.config``
            (None: not known; the folder is listed).

    Yields:
        tuple[int, str]: ``(number, batch folder)``.
    """
    if published is None or published - next_batch > PROBE:
        yield from batchfmt.list_batches(storage, logs, master, next_batch)
        return
    number = next_batch
    while True:
        path = Storage.join(logs, batchfmt.batch_name(master, number))
        if storage.is_published(path):
            yield number, path
            number += 1
            continue
        if number < published:  # counted as published but not there: a gap, or pruned
            yield from batchfmt.list_batches(storage, logs, master, number)
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
