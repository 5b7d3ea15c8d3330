"""Scenarios: the limits of Delta's change feed, provoked for real.

In the ``late`` master capture is away while they run, so it meets them: change files a
VACUUM removed, commits log clean-up removed (their files made old enough for it),
checkpoints as the only record of a table's state, a change feed a user switched off.
Each is carried by the table's image at the next version Delta can still read, and named
in ``wlc status``, ``wlc.log`` and a warning (the ``late`` master's checks are in
``test_conformance.py``). In the ``live`` master capture keeps up, so nothing is lost.
"""

from __future__ import annotations

import glob
import os
import time

from .harness import Scenario


def _age(ctx, days: float = 3) -> None:
    """Date the table's log files ``days`` back, a second apart in version order (Delta's log
    clean-up keeps commits whose times it had to adjust, so each keeps its own second)."""
    old = time.time() - days * 86400
    for f in glob.glob(os.path.join(ctx.path, "_delta_log", "*")):
        name = os.path.basename(f).lstrip(".")
        version = int(name[:20]) if name[:20].isdigit() else 0
        os.utime(f, (old + version, old + version))


def made_and_captured(ctx, props: str = "") -> None:
    """The table as capture knew it before it went away."""
    ctx.sql("CREATE TABLE {t} (k INT, v STRING) USING delta TBLPROPERTIES ('wlc.key' = 'k'" + props + ")")
    ctx.sql("INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')")


def vacuumed_change_files(ctx):
    """VACUUM removes the change files (and rewritten data files) of versions capture had not read."""
    ctx.sql("UPDATE {t} SET v = 'B' WHERE k = 2")
    ctx.sql("DELETE FROM {t} WHERE k = 3")
    ctx.sql("UPDATE {t} SET v = 'A' WHERE k = 1")
    ctx.vacuum()
    ctx.sql("INSERT INTO {t} VALUES (4, 'd')")


def vacuumed_twice(ctx):
    """The files of the run's last version were rewritten and vacuumed too: the image is
    taken at the next version Delta can read."""
    ctx.sql("UPDATE {t} SET v = 'x'")
    ctx.sql("OPTIMIZE {t}")  # no data change: the version after the update is not a transaction
    ctx.sql("INSERT INTO {t} VALUES (4, 'd')")
    ctx.sql("OPTIMIZE {t}")
    ctx.vacuum()


def log_clean_up(ctx):
    """Commits older than ``delta.logRetentionDuration`` are removed at a checkpoint: made
    old (their files dated 3 days back), then a checkpoint and its clean-up run."""
    ctx.sql("INSERT INTO {t} VALUES (4, 'b')")
    ctx.sql("UPDATE {t} SET v = 'B' WHERE k = 2")
    _age(ctx)
    ctx.sql("INSERT INTO {t} VALUES (5, 'c')")
    ctx.sql("DELETE FROM {t} WHERE k = 1")
    ctx.sql("INSERT INTO {t} VALUES (6, 'd')")  # version 6: its checkpoint cleans up what is old
    ctx.sql("UPDATE {t} SET v = 'D' WHERE k = 6")


def checkpoint_only(ctx):
    """A table whose early commits are gone before capture saw it: its state (schema,
    properties) is only in a v2 checkpoint; capture reads it there (and the harness checks it
    against Delta Kernel's reading)."""
    ctx.sql(
        "CREATE TABLE {t} (k INT, v STRING COMMENT 'kept in the checkpoint') USING delta TBLPROPERTIES "
        "('delta.logRetentionDuration' = 'interval 1 hours', 'delta.checkpointInterval' = '2', "
        "'delta.deletedFileRetentionDuration' = 'interval 1 hours', 'delta.checkpointPolicy' = 'v2', "
        "'team' = 'ops')"
    )
    ctx.sql("INSERT INTO {t} VALUES (1, 'a')")
    _age(ctx)
    ctx.sql("INSERT INTO {t} VALUES (2, 'b')")
    ctx.sql("INSERT INTO {t} VALUES (3, 'c')")
    ctx.sql("UPDATE {t} SET v = 'x' WHERE k = 1")


def feed_switched_off(ctx):
    """A user switches the change feed off: capture leaves it off and carries each write by
    the table's image; switched on again, rows come from the feed again."""
    ctx.sql("ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false')")
    ctx.sql("UPDATE {t} SET v = 'B' WHERE k = 2")
    ctx.sql("INSERT INTO {t} VALUES (3, 'c')")
    ctx.sql("ALTER TABLE {t} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    ctx.sql("DELETE FROM {t} WHERE k = 1")


def retained(ctx):
    made_and_captured(
        ctx,
        ", 'delta.logRetentionDuration' = 'interval 1 hours', 'delta.checkpointInterval' = '3', "
        "'delta.deletedFileRetentionDuration' = 'interval 1 hours'",
    )


SCENARIOS = [
    Scenario("limit_vacuumed", vacuumed_change_files, before=made_and_captured),
    Scenario("limit_vacuumed_twice", vacuumed_twice, before=made_and_captured),
    Scenario("limit_log_clean_up", log_clean_up, before=retained),
    Scenario("limit_checkpoint_only", checkpoint_only, rs_reads=False, doc="delta-rs cannot read v2 checkpoints"),
    Scenario("limit_feed_off", feed_switched_off, before=made_and_captured),
]
