"""A check every test's published logs pass: each master's level-0 batches, in batch order, hold
transactions whose times never go back, and watermarks that never go back either (capture's
promise: every commit at or before a batch's watermark is in it or an earlier batch)."""

from __future__ import annotations

import os
import posixpath
import re

from wlcore import batch
from wlcore.errors import BatchError
from wlcore.logstore import LogStore
from wlcore.state import MASTER_CONFIG as CONFIG_FILE, logs_of, read_master_state
from wlcore.storage import Storage

_LEVEL0 = re.compile(r"^(.+)_(\d{12})$")
_COMPACTED = re.compile(r"_L\d+_\d{12}_\d{12}$")


def problems(root: str) -> list[str]:
    """What breaks the rule in the log folders of the masters (and shipped copies) below ``root``.

    Args:
        root (str): a folder the test wrote into (its ``tmp_path``).

    Returns:
        list[str]: one text per broken rule, naming the batch; ``[]`` when all hold. A batch whose
        manifest cannot be read (a test that damages one) is left out; a log with a gap in its
        batch numbers (pruned, or damaged on purpose) is read from after the gap; ids must grow but
        may skip (tests take transactions out of a batch on purpose).
    """
    out = []
    storage = Storage.of(root)
    for folder, _dirs, files in os.walk(root):
        if CONFIG_FILE not in files:
            continue
        try:
            logs = logs_of(read_master_state(storage, folder), folder)
            names = {
                m.group(1) for n in storage.published(logs) if (m := _LEVEL0.match(n)) and not _COMPACTED.search(n)
            }
        except Exception:  # noqa: BLE001 (a wlc.config or a folder a test damaged on purpose)
            continue
        for name in sorted(names):
            out += _check(storage, logs, name)
    return out


def _check(storage: Storage, logs: str, name: str) -> list[str]:
    """The broken rules in the level-0 batches of ``name`` in ``logs``."""
    out = []
    last = None  # (batch number, watermark, last txn, its time) of the batch before
    for ref in LogStore(storage, posixpath.dirname(logs), logs, name).batches():
        number, path = ref.number, ref.path
        try:
            manifest = batch.read_manifest(storage, path)
        except BatchError:
            last = None
            continue
        txns = manifest.txns
        if last is not None and number == last[0] + 1:
            if manifest.watermark < last[1]:
                out.append(f"{path}: watermark {manifest.watermark} before batch {last[0]}'s {last[1]}")
            if txns and last[2] is not None and (txns[0].txn <= last[2] or txns[0].time < last[3]):
                out.append(f"{path}: transaction {txns[0].txn} at {txns[0].time} after {last[2]} at {last[3]}")
        for a, b in zip(txns, txns[1:]):
            if b.txn <= a.txn or b.time < a.time:
                out.append(f"{path}: transaction {b.txn} at {b.time} after {a.txn} at {a.time}")
        previous = (last[2], last[3]) if last is not None else (None, None)
        last = (number, manifest.watermark, *((txns[-1].txn, txns[-1].time) if txns else previous))
    return out
