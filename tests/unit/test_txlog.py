"""The transaction log viewer (`wlr log`, wlr.transactions): filters and output, no Spark."""

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

from wlcore import batch as B
from wlcore.errors import NotFoundError
from wlcore.logstore import LogStore
from wlcore.settings import format_kv
from wlcore.storage import Storage
from wlr import cli, transactions
from wlr.errors import TargetError

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc)


def _rec(txn, table, op, ddl=None, counts=None):
    return B.TxnRecord(
        txn=txn,
        gtid=f"d1:{txn}",
        time=T0 + timedelta(minutes=txn),
        table=table,
        version=txn,
        operation=op,
        ddl=ddl,
        counts=counts or {},
    )


@pytest.fixture
def farm(tmp_path):
    st = Storage.of(str(tmp_path))
    db = tmp_path / "shop"
    logs = str(db / "wlc_logs")
    st.makedirs(logs)
    (db / "wlc.config").write_text(format_kv({"logs": logs, "dbid": "d1", "state": 1}))
    batches = [
        [
            _rec(0, "sales.orders", "CREATE TABLE", "create"),
            _rec(1, "sales.orders", "WRITE", counts={"insert": 3, "delete": 0}),
        ],
        [
            _rec(2, "sales.items", "MERGE", counts={"insert": 1, "update_preimage": 2, "update_postimage": 2}),
            _rec(3, "sales.orders", "DROP TABLE", "drop"),
        ],
    ]
    for n, recs in enumerate(batches):
        store = LogStore(st, os.path.dirname(logs), logs, "shop")
        store.publish(
            store.stage(n),
            B.Manifest(database="shop", dbid="d1", batch=n, watermark=recs[-1].time, txns=recs),
        )
    return str(tmp_path)


def test_filters(farm):
    assert [t["txn"] for t in transactions("shop", farm)] == [0, 1, 2, 3]
    drop = transactions("shop", farm, operation="drop")
    assert drop == [
        {
            "txn": 3,
            "gtid": "d1:3",
            "time": "2026-11-22T10:03:00.000000Z",
            "table": "sales.orders",
            "operation": "DROP TABLE",
            "rows": {},
            "batch": 1,
        }
    ]
    assert [t["txn"] for t in transactions("shop", farm, table="SALES.orders")] == [0, 1, 3]
    assert [t["txn"] for t in transactions("shop", farm, since=1, until="2")] == [1, 2]
    assert [t["txn"] for t in transactions("shop", farm, since="2026-11-22T10:02:00Z")] == [2, 3]
    assert transactions("shop", farm, table="sales.orders", operation="WRITE")[0]["rows"] == {"insert": 3}
    with pytest.raises(TargetError):
        transactions("shop", farm, since="yesterday")
    with pytest.raises(NotFoundError, match="no database 'nope'.*did you mean shop"):
        transactions("nope", farm)


def test_command_line(farm, capsys):
    assert cli.main(["log", farm, "shop", "--operation", "DROP"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["txn", "gtid", "time", "table", "operation", "rows", "batch"]
    assert out[1].split()[:4] == ["3", "d1:3", "2026-11-22T10:03:00.000000Z", "sales.orders"] and len(out) == 3
    assert out[2] == "snapshots at transactions -1 (the empty start) (wlr log --snapshots lists them)"
    assert cli.main(["log", farm, "shop", "--snapshots"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["txn", "time", "batch", "path"] and out[1].split()[:4] == ["-1", "-", "-", "empty"]
    assert "empty start" in out[1]
    assert cli.main(["log", farm, "shop", "--table", "sales.items", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert items[0]["rows"] == {"insert": 1, "update_postimage": 2, "update_preimage": 2}
    assert cli.main(["log", farm, "nope"]) == 3
    assert "no database 'nope'" in capsys.readouterr().err


def test_a_lower_bound_reads_a_few_manifests_of_a_long_log(tmp_path, monkeypatch):
    """``since`` finds its first batch by bisection (empty batches included) and the answer is the
    same as filtering every transaction; ``until`` stops reading at the first batch past it."""
    st = Storage.of(str(tmp_path))
    db = tmp_path / "long"
    logs = str(db / "wlc_logs")
    st.makedirs(logs)
    (db / "wlc.config").write_text(format_kv({"logs": logs, "dbid": "d1", "state": 1}))
    txn = 0
    for n in range(300):
        recs = [] if n % 7 == 3 else [_rec(txn + i, f"s.t{(txn + i) % 3}", "WRITE") for i in range(n % 3 + 1)]
        txn += len(recs)
        store = LogStore(st, os.path.dirname(logs), logs, "long")
        store.publish(store.stage(n), B.Manifest("long", "d1", n, T0 + timedelta(minutes=txn), recs))
    everything = transactions("long", str(tmp_path))
    read = []
    real_read = B.read_manifest
    monkeypatch.setattr(B, "read_manifest", lambda s, p: read.append(p) or real_read(s, p))
    for since, until in [(0, None), (1, 5), (txn - 4, None), (250, 260), (txn, None), (txn + 5, None)]:
        read.clear()
        got = transactions("long", str(tmp_path), since=since, until=until)
        assert got == [t for t in everything if t["txn"] >= since and (until is None or t["txn"] <= until)]
        if since >= 250:
            assert len(read) < 30, f"since={since} read {len(read)} of 300 manifests"
    at = T0 + timedelta(minutes=txn - 10)
    got = transactions("long", str(tmp_path), since=at)
    assert got == [t for t in everything if t["time"] >= at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")] and got
    read.clear()
    assert [t["txn"] for t in transactions("long", str(tmp_path), since=txn - 3, table="s.t1")] == [
        t["txn"] for t in everything if t["txn"] >= txn - 3 and t["table"] == "s.t1"
    ]
    with pytest.raises(NotFoundError, match="did you mean"):
        transactions("long", str(tmp_path), since=txn - 1, table="s.t9")
