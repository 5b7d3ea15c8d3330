"""Make the golden fixtures of tests/data/ by running the code once (see tests/data/README.md).

    PYTHONPATH=. WLC_CONFIG=tests/wlc-test.yaml python tests/data/make_fixtures.py [OUT]

A master ``m`` with one keyed table ``s.t`` (four transactions, a batch each), a replica ``r``
of it, a level-1 batch compacting batches 1..3 and a snapshot at the last transaction, made in a
temporary dbfarm through the public API (``wlc``, ``wlr``); the files are copied into OUT
(default: this folder). Commit ids, times and checksums differ on every run: the test reads
the files and checks what does not depend on them.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

OUT = os.path.dirname(os.path.abspath(__file__))


def make(out: str) -> None:
    """Run the code in a temporary dbfarm and copy its files into ``out`` (a folder path)."""
    import wlc
    import wlr

    with tempfile.TemporaryDirectory() as farm:
        m = wlc.master("m", dbfarm=farm)
        wlc.beat(0)
        spark = m.spark
        t = m.table_path("s.t")
        spark.sql(f"CREATE TABLE delta.`{t}` (id INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
        wlc.flush()
        spark.sql(f"INSERT INTO delta.`{t}` VALUES (1, 'a'), (2, 'b')")
        wlc.flush()
        spark.sql(f"UPDATE delta.`{t}` SET v = 'B' WHERE id = 2")
        wlc.flush()
        spark.sql(f"DELETE FROM delta.`{t}` WHERE id = 1")
        wlc.flush()
        made = wlc.compact(level1="3 batches", level2="100 batches")
        assert made, "no level-1 batch was made"
        snap = wlc.snapshot()
        rep = wlr.replicate("m", replica="r", dbfarm=farm, follow=False)
        assert rep.tick() == wlc.tick()
        rep.close()
        wlc.stop()
        _copy(farm, out, snap.path)


def _copy(farm: str, out: str, snapshot_path: str) -> None:
    """The level-0 batch of the insert, the level-1 batch, the snapshot and both state files
    (``master/wlc.config``, ``replica/wlr.config``)."""
    logs = os.path.join(farm, "m", "wlc_logs")
    names = sorted(os.listdir(logs))
    level0 = os.path.join(logs, "m_000000000001")
    level1 = next(os.path.join(logs, n) for n in names if n.startswith("m_L1_"))
    for name in ("batch_level0", "batch_level1", "snapshot"):
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    shutil.copytree(level0, os.path.join(out, "batch_level0"))
    shutil.copytree(level1, os.path.join(out, "batch_level1"))
    shutil.copytree(snapshot_path.removeprefix("file:"), os.path.join(out, "snapshot"))
    for db, state in (("m", "wlc.config"), ("r", "wlr.config")):
        folder = os.path.join(out, "master" if db == "m" else "replica")
        os.makedirs(folder, exist_ok=True)
        shutil.copy(os.path.join(farm, db, state), os.path.join(folder, state))


if __name__ == "__main__":
    make(sys.argv[1] if len(sys.argv) > 1 else OUT)
