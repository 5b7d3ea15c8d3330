"""Replay progress read back from a replica table's Delta log (commit files written here; no Spark)."""

import json
import os

from wlcore.session import LateSession
from wlcore.storage import Storage
from wlr.apply import Applier, tag

DBID = "abc"


def commit(table: str, version: int, user_metadata: str | None, data_change: bool = True) -> None:
    log = os.path.join(table, "_delta_log")
    os.makedirs(log, exist_ok=True)
    actions = [
        {
            "commitInfo": {
                "timestamp": 1_700_000_000_000 + version,
                "operation": "WRITE",
                **({"userMetadata": user_metadata} if user_metadata else {}),
            }
        }
    ]
    if data_change:
        actions.append({"add": {"path": f"part-{version}.parquet", "dataChange": True}})
    with open(os.path.join(log, f"{version:020d}.json"), "w") as fh:
        fh.write("\n".join(json.dumps(a) for a in actions) + "\n")


def test_progress_and_interrupted_transactions(tmp_path):
    table = str(tmp_path / "r" / "s" / "t")
    applier = Applier(LateSession(), Storage.of(str(tmp_path)), str(tmp_path / "r"), DBID)
    assert applier.tables.current_version("s.t") == -1 and applier.tables.last_final_txn("s.t") == -1
    os.makedirs(os.path.join(table, "_delta_log"))  # a CREATE killed in its first commit
    assert applier.tables.current_version("s.t") == -1 and not applier.tables.created_by_replay("s.t")
    commit(table, 0, tag(DBID, 3, part=True), data_change=False)  # txn 3's CREATE, a part
    commit(table, 1, tag(DBID, 3))  # txn 3's final commit
    commit(table, 2, tag(DBID, 7, part=True))  # txn 7: overwrite done, then killed
    assert applier.tables.created_by_replay("s.t")
    assert applier.tables.last_final_txn("s.t") == 3  # txn 7 is not done
    assert applier.tables.resuming("s.t", 7) and not applier.tables.resuming("s.t", 3)
    assert applier.tables.foreign_writes("s.t", -1) == []
    commit(table, 3, tag(DBID, 7))
    assert applier.tables.last_final_txn("s.t") == 7 and not applier.tables.resuming("s.t", 7)
    commit(table, 4, None)  # someone else wrote the replica
    assert applier.tables.foreign_writes("s.t", 3) == ["version 4 (WRITE)"]
    assert applier.tables.last_final_txn("s.t") == 7


def test_a_replay_tag_is_read_for_its_master_or_for_any():
    """``parse_span`` reads the transactions a tag names, for one master's id or (None) any
    master's, and nothing from text that is not a replay tag."""
    from wlr.apply import parse_span

    assert parse_span(tag(DBID, 9, first=4), DBID) == (4, 9, True)
    assert parse_span(tag(DBID, 9, part=True), None) == (9, 9, False)
    assert parse_span(tag("other", 9), DBID) is None
    assert parse_span(tag("other", 12, first=10), None) == (10, 12, True)
    for text in (None, "", "wlr:", "wlr:abc", "wlr:abc:x-1", "nightly load"):
        assert parse_span(text, None) is None, text
