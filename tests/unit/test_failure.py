"""A replica's stored failure raised again by ``Replica.raise_if_failed`` (no Spark: the replica is
only opened, never replayed)."""

from __future__ import annotations

import pytest

import wlr
from wlcore.state import ReplicaState, write_replica_state
from wlcore.storage import Storage
from wlr import failure


def _replica(farm: str, state: ReplicaState) -> wlr.Replica:
    write_replica_state(Storage.of(farm), Storage.join(farm, "r"), state)
    return wlr.Replica("m", "r", dbfarm=farm)


def test_raise_if_failed_raises_the_stored_failure(tmp_path):
    state = ReplicaState.from_text("", "<test>")
    failure.record(state, 3, 7, "t", "boom")
    replica = _replica(str(tmp_path), state)
    try:
        with pytest.raises(wlr.ReplicationError, match="transaction 7 on table t \\(batch 3\\): boom"):
            replica.raise_if_failed()
    finally:
        replica.close()


def test_raise_if_failed_is_silent_once_the_failure_is_cleared(tmp_path):
    state = ReplicaState.from_text("", "<test>")
    failure.record(state, 3, 7, "t", "boom")
    failure.clear(state)
    replica = _replica(str(tmp_path), state)
    try:
        replica.raise_if_failed()
    finally:
        replica.close()
