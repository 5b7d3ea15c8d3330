"""The follower's retries (PostgreSQL's apply worker restarts after a failure the same way):
backoff from ``replica.beat`` doubling to ``replica.retry_max``, recorded in wlr.config and
wlr.log and counted in metrics; a divergence is not retried. The round is a stand-in: what is
under test is the follow loop, not replay."""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace

from wlcore.session import LateSession
from wlcore.storage import Storage
from wlr import failure
from wlr.book import ReplicaLock, StateBook
from wlr.errors import DivergedError
from wlr.follow import Follower
from wlr.monitor import EVENTS, ReplicaMetrics, format_replica_status

from ..waiting import wait_until


def _follower(tmp_path, step, name: str) -> Follower:
    storage = Storage.of(str(tmp_path))
    path = os.path.join(str(tmp_path), name)
    os.makedirs(path)
    book = StateBook(storage, path, name)
    book.state.tick = 4
    book.save()
    setup = SimpleNamespace(published=lambda mcfg: None, source=None, master="m", master_dbfarm="farm")
    replay = SimpleNamespace(steps=step, stop=threading.Event(), setup=setup)
    catalog = SimpleNamespace(refresh=lambda: None)
    return Follower(
        book,
        ReplicaLock(storage, path),
        replay,  # type: ignore[arg-type]
        catalog,  # type: ignore[arg-type]
        ReplicaMetrics("m", name),
        0.1,
        0.4,
        LateSession(),
        None,
    )


def test_delays_double_from_the_beat_up_to_retry_max():
    assert [failure.retry_delay(n, 1, 60) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert failure.retry_delay(1, 5, 2) == 5  # retry_max below the beat: the beat
    assert failure.retry_delay(3, 0, 10) == 0.4  # a beat of 0 still waits a little


def test_a_failure_is_retried_with_backoff_until_it_passes(tmp_path):
    calls: list[int] = []
    follower: Follower

    def step(target, progress):
        calls.append(len(calls))
        state = follower.book.state
        if len(calls) <= 4:  # fails four times, as a round stores a failure and raises it
            raise failure.record(state, 2, 5, "s.t", "checksum of a change file")
        if state.error_cause:
            state.tick = 5
            line = failure.clear_if_passed(state, 3)
            assert line and "RECOVERED" in line
        return None

    follower = _follower(tmp_path, step, "r1")
    retries0 = EVENTS().retries.labels("m", "r1", "transaction")._value.get()
    follower.start()
    try:
        wait_until(lambda: len(calls) >= 6, 30, "the fifth try and a round after it")
    finally:
        follower.stop()
    st = follower.book.reload()
    assert st.tick == 5 and not st.error_cause and not st.has("retries") and not st.has("retry_at")
    log = open(os.path.join(str(tmp_path), "r1", "wlr.log")).read()
    for n, delay in ((1, "0.1"), (2, "0.2"), (3, "0.4"), (4, "0.4")):  # doubling, at most retry_max
        assert f"retry {n} of transaction 5 at " in log and f"(in {delay} s; replica.retry_max 0.4 s)" in log
    assert "wlr accept skips it" in log
    assert EVENTS().retries.labels("m", "r1", "transaction")._value.get() - retries0 == 4


def test_status_shows_the_next_try(tmp_path):
    def step(target, progress):
        raise failure.record(follower.book.state, 7, None, None, "batch 7 is missing; batch 8 follows it")

    follower = _follower(tmp_path, step, "r2")
    follower.start()
    try:
        wait_until(lambda: follower.book.current().retries >= 2, 30, "two tries of the missing batch")
    finally:
        follower.stop()
    st = follower.book.current()
    assert st.error_cause and st.retry_at is not None and st.state == "failed"
    assert failure.kind(st) == "logs"
    log = open(os.path.join(str(tmp_path), "r2", "wlr.log")).read()
    assert "retry 1 of batch 7 at" in log and "restore the batch" in log
    status = {
        "replica": "r2",
        "master": "m",
        "source": "m",
        "state": "failed",
        "tick": 4,
        "clock": None,
        "master_tick": 9,
        "unpublished": 0,
        "lag_transactions": 5,
        "lag_seconds": 3.0,
        "capture_text": "alive",
        "heartbeat": None,
        "skipped": [],
        "error": failure.described(st),
        "retries": st.retries,
        "retry_at": st.retry_at,
    }
    text = format_replica_status(status, "farm")
    assert f"attempt {st.retries} failed; next at {st.retry_at.isoformat()}" in text


def test_a_divergence_ends_following_without_a_retry(tmp_path):
    calls: list[int] = []

    def step(target, progress):
        calls.append(1)
        raise DivergedError("the source's history is not this replica's from transaction 3", 3)

    follower = _follower(tmp_path, step, "r3")
    failures0 = EVENTS().failures.labels("m", "r3", "diverged")._value.get()
    follower.start()
    wait_until(lambda: not follower.following(), 30, "following to end at the divergence")
    follower.close()
    st = follower.book.reload()
    assert calls == [1] and not st.has("retries") and st.state == "failed" and "history" in st.error_cause
    assert "retry" not in open(os.path.join(str(tmp_path), "r3", "wlr.log")).read()
    assert EVENTS().failures.labels("m", "r3", "diverged")._value.get() - failures0 == 1


def test_a_refused_source_is_said_once_and_tried_again(tmp_path):
    """A source that refuses (fenced by a promotion, out of reach) is not a stored failure: the
    follower says why once in wlr.log, tries again with backoff, and goes on when it answers."""
    from wlr.errors import ReplicaStateError

    calls: list[int] = []

    def step(target, progress):
        calls.append(1)
        if len(calls) <= 3:
            raise ReplicaStateError("the source m is fenced: r1 was promoted; read from it instead: source='r1'")
        return None

    follower = _follower(tmp_path, step, "r4")
    follower.start()
    try:
        wait_until(lambda: len(calls) >= 5, 30, "the source to answer and a round after it")
        assert follower.following()
    finally:
        follower.stop()
    log = open(os.path.join(str(tmp_path), "r4", "wlr.log")).read()
    assert log.count("cannot follow: the source m is fenced") == 1 and "source='r1'" in log
    assert not follower.book.reload().error_cause  # not a failure of replay: nothing to accept
