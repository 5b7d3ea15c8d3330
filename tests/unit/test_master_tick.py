"""``tick`` on the master is the last *published* transaction (wlc.config's ``tick``), as a
replica's is the last applied; the last *logged* one, maybe in a batch still open, is
``last_logged``. No Spark: the open batch is stood in for by the record it last logged."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import wlc
from wlc.master import Master
from wlcore.batch import TxnRecord


def test_tick_is_the_last_published_and_last_logged_runs_ahead_while_a_batch_is_open(tmp_path, monkeypatch):
    m = Master("m", dbfarm=str(tmp_path), capture=False)
    assert (m.tick(), m.last_logged()) == (-1, -1)  # nothing logged, nothing published
    m.config.tick = 3  # transactions up to 3 published ...
    logged = TxnRecord(5, "d:5", datetime(2026, 1, 1, tzinfo=timezone.utc), "s.t", 7, "WRITE", change="cdf")
    m.publisher = SimpleNamespace(last_logged=logged)  # ... 4 and 5 logged into the open batch
    assert (m.tick(), m.last_logged()) == (3, 5)
    monkeypatch.setattr(wlc, "_current", m)
    assert (wlc.tick(), wlc.last_logged()) == (3, 5)
    assert "tick=3" in repr(m)
