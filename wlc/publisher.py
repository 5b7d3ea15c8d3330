"""The publisher: committed transactions staged into the open batch, published when its beat is over.

MonetDB's ``wlc.beat``: a batch is published ``beat`` seconds after its first record (0: one
batch per transaction), or at once by ``flush()``. Staging a commit reads only its commit
file; the change rows of all staged transactions of a table are copied from the change feed
together (one read per table and version range), when the batch is published or when the
oldest waited ``capture.stage_within`` seconds. :class:`Publisher` holds the open batch of a
:class:`wlc.Master`; the master calls :meth:`Publisher.step` at every scan. The same writes of
``wlc.config`` carry the master's heartbeat (the instant capture last said it was alive).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from wlcore import batch as batchfmt
from wlcore.batch import CaptureState, Manifest, Planned, TxnRecord
from wlcore.errors import BatchError
from wlcore.faults import crash_point
from wlcore.names import batch_folder
from wlcore.settings import settings
from wlcore.storage import Storage
from wlcore.utc import utc_iso, utcnow

from .capture import Capture, Cursor, place_in_order
from .master_record import MasterRecord, TableNotes
from .metrics import PublishCounts

log = logging.getLogger("wlc.master")

_EPS = timedelta(microseconds=1)


def settle_limit(now: datetime, settle: float) -> datetime:
    """The newest commit time capture takes at ``now`` (``capture.settle``).

    Args:
        now (datetime): the scan's instant (UTC).
        settle (float): seconds a commit must be old.

    Returns:
        datetime: ``now`` minus ``settle`` seconds.
    """
    return now - timedelta(seconds=settle)


def to_records(items: list[Planned], state: CaptureState, dbid: str) -> list[TxnRecord]:
    """Give ``items`` their transaction ids (gap-free, in order) and make their records. The
    records' ``rows`` and ``counts`` are filled in once the change rows are written.

    Args:
        items (list[Planned]): the planned transactions, in commit order.
        state (CaptureState): capture's state: ids are taken from ``next_txn``, which moves past them.
        dbid (str): the master's database id: the GTIDs are ``<dbid>:<txn>``.

    Returns:
        list[TxnRecord]: one record per item, in order.
    """
    records = []
    for item in items:
        txn = state.next_txn
        state.next_txn += 1
        records.append(
            TxnRecord(
                txn=txn,
                gtid=f"{dbid}:{txn}",
                time=item.time,
                table=item.table,
                version=item.version,
                operation=item.operation,
                ddl=item.ddl,
                change=item.change,
                meta=item.meta.to_json() if (item.meta is not None and (item.ddl or item.change == "image")) else None,
                user=item.user,
                adds=list(item.adds),
                ops=item.ops,
                gap=item.gap,
                committed=item.committed,
            )
        )
    return records


@dataclass
class CaptureTiming:
    """Capture's timing (the ``capture`` section of the settings), shared by a master's parts;
    a :class:`wlc.Master` may change it (``master.stage_within = 3600``).

    Attributes:
        settle: seconds a commit must be old before capture takes it.
        polling: True: poll the folder instead of waiting for filesystem events.
        poll_interval: seconds between scans of an idle master (and between heartbeats).
        stage_within: seconds staged change rows may wait before they are copied into the open batch.
        retry_max: seconds, the longest wait between two reads of a held table.
    """

    settle: float
    polling: bool
    poll_interval: float
    stage_within: float
    retry_max: float

    @classmethod
    def from_settings(cls) -> "CaptureTiming":
        """The timing of the ``capture`` section of the settings (:func:`wlcore.settings.settings`).

        Raises:
            ConfigError: the settings are malformed.
        """
        cfg = settings().capture
        return cls(cfg.settle, cfg.polling, cfg.poll_interval, cfg.stage_within, cfg.retry_max)


@dataclass
class OpenBatch:
    """The batch being filled.

    Attributes:
        staging: its staging folder in the log folder (published by renaming it).
        opened: ``time.monotonic()`` when its first transaction was staged (its beat counts from then).
        opening: ``{table: its cursor before this batch}`` (None: a table new in it), where a
            table's cursor goes back to should its change rows not be readable.
    """

    staging: str
    opened: float
    opening: dict[str, Cursor | None] = field(default_factory=dict)


class Publisher:
    """The open batch of one master: staging of what capture finds, publishing when its beat is over.

    Args:
        capture: the master's capture (its cursors, holds and change-row copier).
        record: the master's ``wlc.config`` and ``wlc.log``.
        notes: the master's per-table notes (``not_replicated``, ``feed_notes``, ``held``).
        timing: capture's timing (settle, poll interval, stage_within; seconds).
        last: the last published transaction when capture resumes (None: none yet).
    """

    def __init__(
        self,
        capture: Capture,
        record: MasterRecord,
        notes: TableNotes,
        timing: CaptureTiming,
        last: TxnRecord | None = None,
    ):
        self.capture = capture
        self.record = record
        self.notes = notes
        self.timing = timing
        self.storage = record.storage
        self.dbname = record.dbname
        self.last_logged: TxnRecord | None = last  # captured into a batch, published or open
        self.last_published: TxnRecord | None = last
        self._pending: list[TxnRecord] = []
        self._unwritten: list[tuple[TxnRecord, Planned]] = []  # staged without their change rows yet
        self._unwritten_since: float | None = None  # time.monotonic() of the oldest of them
        self._open: OpenBatch | None = None
        self._watermark_saved = float("-inf")  # time.monotonic() of the last watermark or heartbeat write
        self.counts = PublishCounts(record.dbname)  # counted for Prometheus while capture is reported

    @property
    def staged(self) -> int:
        """Transactions captured into the open batch and not published yet."""
        return len(self._pending)

    def step(self, take_all: bool, look: bool = True) -> bool:
        """One scan: stage new transactions, publish when the beat says so.

        A publish that fails leaves capture exactly where it was: the staged transactions
        keep their ids and rows and are published first by the next scan.

        Args:
            take_all (bool): take every visible commit, however recent, and publish what is
                staged now (a flush); False: only commits ``capture.settle`` seconds old, publish
                when the beat says so.
            look (bool): read the tables' logs; False: the database folder's watcher saw no change
                since the last scan, which left nothing for later: only publish what is due and
                move the watermark.

        Returns:
            bool: True when commits were seen but left for a later scan (too recent).
        """
        now = utcnow()
        limit = None if take_all else settle_limit(now, self.timing.settle)
        watermark = settle_limit(now, self.timing.settle)
        cap = self.capture
        items, cursors = cap.plan(limit, now) if look else ([], {})
        self.notes.refused(cap.refused)
        # captured late (place_in_order): after the transaction before, and after the watermark published (its promise stands)
        place_in_order(items, self._floor())
        if self.record.beat_seconds == 0:
            if self._pending:  # left by a failed publish, or staged under an earlier beat
                self._publish(min(watermark, items[0].time - _EPS) if items else watermark)
            for k, item in enumerate(items):
                if item.table in cap.taken_back:
                    continue  # its rows could not be read: its later transactions wait with it (Holds)
                if k < len(items) - 1:
                    # the cursor as after this transaction; the watermark stops before the next one
                    self._stage([item], {item.table: None if item.ddl == "drop" else item.cursor})
                    self._publish(min(watermark, items[k + 1].time - _EPS))
                else:
                    self._stage([item], cursors)
                    self._publish(watermark)
        elif items:
            self._stage(items, cursors)
        cap.advance(cursors)
        cap.enable_capture_properties({k: v for k, v in cursors.items() if v is not None})
        if self._pending and (take_all or time.monotonic() >= self._publish_at()):
            self._publish(watermark)
        elif self._unwritten and time.monotonic() >= self._write_at():
            self._write_rows()
        elif not self._pending:
            self._note_watermark(cap.holds.watermark(watermark), force=take_all)
        self.notes.feed(cap.take_notices())  # change-feed limits met by this scan and its writes
        self.notes.held(cap.holds.status())
        return cap.deferred

    def _stage(self, items: list[Planned], cursors: Mapping[str, Cursor | None]) -> None:
        """Give ``items`` ids and records in the open batch and move the cursors.

        Reading the commit files is all a commit costs here: the change rows are copied
        from the change feed later, for all staged transactions of a table at once (one
        read per table and version range), when the batch is published or when the oldest
        of them has waited ``capture.stage_within`` seconds. Staged records live in memory
        until published: a capturer killed before that starts again from the cursors of
        the last published batch.
        """
        cap = self.capture
        if self._open is None:
            staging = self.record.store.stage(cap.state.next_batch)
            self._open = OpenBatch(staging, time.monotonic())
        opening = self._open.opening
        for item in items:  # where each table's cursor goes back to, should its rows not be readable
            if item.table not in opening:
                old = cap.state.tables.get(item.table)
                opening[item.table] = None if old is None else Cursor.from_json(old.to_json())
        records = to_records(items, cap.state, self.record.config.dbid)
        if self._unwritten_since is None:
            self._unwritten_since = time.monotonic()
        self._unwritten.extend(zip(records, items))
        self._pending.extend(records)
        self.last_logged = self._pending[-1]
        cap.advance(cursors)

    def _write_rows(self) -> None:
        """Copy the change rows of every staged transaction that has none yet into the open batch.

        On failure nothing is lost: the transactions keep their ids and the next call writes
        them again (a version's rows are replaced, never appended twice).
        """
        if not self._unwritten or self._open is None:
            return
        written = self.capture.write_rows(self._open.staging, [item for _rec, item in self._unwritten])
        for i, (rec, item) in enumerate(self._unwritten):
            rec.rows, rec.counts, rec.lost = written.rows.get(i), written.counts.get(i, {}), written.lost.get(i)
            rec.change, rec.gap = item.change, item.gap
            if item.change == "image" and item.meta is not None:
                rec.meta = item.meta.to_json()
            if rec.lost:
                log.warning("transaction %d: %s; replay will stop there", rec.txn, rec.lost)
        for table in {item.table for _rec, item in self._unwritten} - set(written.unreadable):
            self.capture.holds.release(table, "rows")  # held for its rows: they are written now
        self._unwritten, self._unwritten_since = [], None
        if written.unreadable:
            self._take_back(self._open, written.unreadable)
        crash_point("capture.staged")

    def _take_back(self, open_batch: OpenBatch, unreadable: dict[str, str]) -> None:
        """Take the open batch's transactions of tables whose rows cannot be read out of it
        (:class:`wlc.capture.Holds`): their cursors go back, the tables are held and read again with
        backoff, the other transactions keep their order with ids closed up. Nothing of the
        batch is published yet, so no id is ever given twice."""
        cap = self.capture
        first = self._pending[0].txn
        now = utcnow()
        for table, cause in unreadable.items():
            mine = [r for r in self._pending if r.table == table]
            bound = min((r.committed or r.time) for r in mine) if mine else None
            cap.holds.hold(table, f"its rows cannot be read: {cause}", bound, now, kind="rows")
            cap.taken_back.add(table)  # logged and noted by TableNotes.held at the end of the scan
            opening = open_batch.opening.pop(table, None)
            if opening is None:
                cap.state.tables.pop(table, None)
            else:
                cap.state.tables[table] = opening
            for sub in ("rows", "images"):
                self.storage.rm(Storage.join(open_batch.staging, sub, batch_folder(table)))
        self._pending = [r for r in self._pending if r.table not in unreadable]
        for i, rec in enumerate(self._pending):
            rec.txn, rec.gtid = first + i, f"{self.record.config.dbid}:{first + i}"
        cap.state.next_txn = first + len(self._pending)
        self.last_logged = self._pending[-1] if self._pending else self.last_published

    def _floor(self) -> datetime | None:
        """The time a new transaction must come after (UTC): the last one captured, and the
        watermark recorded (every commit before it was published); None: neither yet."""
        times = [
            t for t in (self.last_logged.time if self.last_logged else None, self.record.config.watermark_time) if t
        ]
        return max(times) if times else None

    def _publish_at(self) -> float:
        """``time.monotonic()`` at which the open batch is published (its beat is over); never when none is open."""
        return float("inf") if self._open is None else self._open.opened + self.record.beat_seconds

    def _write_at(self) -> float:
        """``time.monotonic()`` at which the staged change rows are written (the oldest waited
        ``stage_within``); never when none waits."""
        if self._unwritten_since is None:
            return float("inf")
        return self._unwritten_since + self.timing.stage_within

    def due_in(self) -> float | None:
        """Seconds until the open batch is due (published, or its staged rows written); None: nothing open."""
        if not self._pending or self._open is None:
            return None
        due = self._publish_at() if not self._unwritten else min(self._publish_at(), self._write_at())
        return max(0.0, due - time.monotonic())

    def _publish(self, watermark: datetime) -> None:
        """Publish the open batch. On failure nothing moves: the same batch is tried again later.

        Raises:
            BatchError: the batch's name is taken in the log folder (another capturer?).
        """
        cap = self.capture
        began = time.monotonic()
        self._write_rows()
        watermark = cap.holds.watermark(watermark)  # never past a held table's first unread commit
        previous = self.record.config.watermark_time
        if previous is not None and watermark < previous:
            watermark = previous  # never back: what an earlier watermark promised stays promised
        if not self._pending or self._open is None:  # every staged transaction was taken back: its table is held
            if self._open is not None:
                self.record.store.discard(self._open.staging)
            self._open = None
            self._note_watermark(watermark)
            return
        number_ = cap.state.next_batch
        manifest = Manifest(
            database=self.dbname,
            dbid=self.record.config.dbid,
            batch=number_,
            watermark=watermark,
            txns=list(self._pending),
            epochs=self.record.config.epochs,
        )
        state = cap.state.copy()
        state.next_batch += 1
        manifest.cursors = state
        self.record.check_publishing()  # a replica was promoted: this master may not publish
        try:
            self.record.store.publish(self._open.staging, manifest)
        except FileExistsError:
            raise BatchError(
                f"cannot publish batch {number_} of {self.dbname!r}: {batchfmt.batch_name(self.dbname, number_)} "
                f"already exists in {self.record.logs} (another capturer, or a copied folder?). Transactions "
                f"{manifest.first_txn}..{manifest.last_txn} stay staged and are published with the same ids once "
                "that name is free; move the foreign folder out of the log folder"
            ) from None
        crash_point("capture.published")
        # published: these records must never be published again, whatever happens below
        cap.state.next_batch += 1
        self.last_logged = self.last_published = self._pending[-1]
        self._pending, self._open = [], None
        self.record.config.batches, self.record.config.tick = cap.state.next_batch, manifest.last_txn
        self.record.config.write, self.record.config.watermark = self.last_logged.time, watermark
        self.record.save()
        self.record.note(
            f"published batch {manifest.batch}: transactions {manifest.first_txn}..{manifest.last_txn} "
            f"({len(manifest.txns)}), watermark {utc_iso(watermark)}"
        )
        self.counts.published(len(manifest.txns), time.monotonic() - began)

    def _note_watermark(self, watermark: datetime, force: bool = False) -> None:
        """Record an idle master's advancing watermark, at most once per poll interval unless
        ``force``; the same write carries the heartbeat."""
        old = self.record.config.watermark_time
        if old and (
            old >= watermark or (not force and time.monotonic() - self._watermark_saved < self.timing.poll_interval)
        ):
            return
        self.record.config.watermark = watermark
        self._write_heartbeat()

    def heartbeat(self) -> None:
        """Write the heartbeat into ``wlc.config`` when the last one is a poll interval old
        (an idle master's watermark writes carry it already)."""
        if time.monotonic() - self._watermark_saved < self.timing.poll_interval:
            return
        self._write_heartbeat()

    def _write_heartbeat(self) -> None:
        """Save ``wlc.config`` with a fresh heartbeat (and whatever else changed in it)."""
        self.record.config.heartbeat = utcnow()
        self.record.config.drop("capture_stopped")
        self.record.save()
        self._watermark_saved = time.monotonic()
