"""The bookkeeping of :class:`wlcore.session.LateSession` (pure logic: the process's Spark stands in
as plain objects; ``tests/integration/test_daemon.py`` ends and starts a real one)."""

from __future__ import annotations

import itertools

import pytest

from wlcore import session as session_module
from wlcore.session import LateSession


@pytest.fixture
def fake_spark(monkeypatch):
    """Sessions are numbered objects; ``running`` is the process's Spark (None: none runs)."""
    state = {"running": None, "stopped": []}
    numbers = itertools.count(1)

    def active():
        if state["running"] is None:
            state["running"] = f"spark{next(numbers)}"
        return state["running"]

    def stop(s):
        state["stopped"].append(s)
        state["running"] = None

    monkeypatch.setattr(session_module, "active_session", active)
    monkeypatch.setattr(session_module, "running_session", lambda: state["running"])
    monkeypatch.setattr(session_module, "stop_spark", stop)
    return state


def test_a_session_it_started_ends_once_unused_and_derived_ones_are_made_again(fake_spark):
    root = LateSession(None, lambda base: f"{base}/replay")
    child = root.derived(lambda base: f"{base}/thread")
    assert child() == "spark1/replay/thread" and root.made == "spark1/replay"
    assert not root.release(3600)  # used a moment ago
    assert not child.release(0)  # only the root ends Spark
    assert root.release(0)
    assert fake_spark["stopped"] == ["spark1/replay"]
    assert root.made is None and child.made is None and child.running() is None
    assert child() == "spark2/replay/thread"  # started again at the next use


def test_a_session_given_or_already_running_is_never_ended(fake_spark):
    given = LateSession("users")
    assert given() == "users" and not given.release(0)
    fake_spark["running"] = "notebook"
    late = LateSession(None)
    assert late() == "notebook" and not late.release(0)
    assert fake_spark["stopped"] == []
