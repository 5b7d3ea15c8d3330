"""What a replay target is taken to mean, and which targets are refused before anything is written
(wlcore.target), and how the wait for a target not yet published is said (wlr.follow). No Spark."""

from datetime import datetime, timedelta, timezone

import pytest

from wlcore.errors import ReplicationTimeout, TargetError
from wlcore.settings import format_kv, settings
from wlcore.state import MasterState
from wlcore.target import Published, ahead, check_capture, check_in_time, check_not_empty, date_note, date_only, meaning
from wlr.follow import TargetWait
from wlr.planner import Target, parse_until

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=timezone.utc)
ISO = "%Y-%m-%dT%H:%M:%S.%fZ"


def master_config(tick=36, watermark=NOW - timedelta(seconds=1), heartbeat=NOW, state=1) -> MasterState:
    cfg = {
        "tick": str(tick),
        "state": str(state),
        "write": (NOW - timedelta(seconds=30)).strftime(ISO),
        "watermark": "stopped" if state == 2 else watermark.strftime(ISO),
    }
    if heartbeat is not None:
        cfg["heartbeat"] = heartbeat.strftime(ISO)
    return MasterState.from_text(format_kv(cfg))


def published(**kw) -> Published:
    return Published.of(master_config(**kw), NOW)


@pytest.mark.parametrize(
    "until,expected",
    [
        ("2026-11-24", True),
        (" 20261124 ", True),
        ("2026-11-24T00:00:00Z", False),
        ("2026-11-24 10:00", False),
        (42, False),
        (None, False),
        (datetime(2026, 11, 24), False),
    ],
)
def test_date_only(until, expected):
    assert date_only(until) is expected


def test_a_date_alone_says_what_it_was_taken_to_mean():
    target = parse_until("2026-11-24")
    assert target.time == datetime(2026, 11, 24, tzinfo=timezone.utc)
    assert date_note(target, cli=True) == (
        "--until 2026-11-24 taken as 2026-11-24T00:00:00Z (the start of that day, UTC); write the full instant to "
        "mean another time, e.g. --until 2026-11-24T17:30:00Z"
    )
    assert date_note(target).startswith("until='2026-11-24' taken as 2026-11-24T00:00:00Z")
    assert meaning(target) == "2026-11-24 (taken as 2026-11-24T00:00:00Z, the start of that day, UTC)"
    for full in ("2026-11-24T00:00:00Z", datetime(2026, 11, 24, tzinfo=timezone.utc), 7):
        assert date_note(parse_until(full)) is None


def test_minus_one_is_before_the_first_transaction():
    assert parse_until(-1) == Target("txn", txn=-1)
    with pytest.raises(TargetError, match="-1: before the first transaction"):
        parse_until(-2)


def test_published_says_tick_watermark_last_commit_and_capture():
    assert published().describe() == (
        "the master has published up to transaction 36 (watermark "
        "2026-11-24T11:59:59Z, last commit 2026-11-24T11:59:30Z, capture alive)"
    )
    stale = published(heartbeat=NOW - timedelta(minutes=5))
    assert stale.capture == "stale" and "capture stale since 2026-11-24T11:55:00Z" in stale.describe()
    assert "capture not started" in published(heartbeat=None).describe()
    stopped = published(state=2)
    assert stopped.stopped and "watermark stopped" in stopped.describe() and "capture stopped" in stopped.describe()
    copy = Published.of(master_config(heartbeat=None), NOW, "shipped copy /x", is_master=False)
    assert copy.describe().startswith("shipped copy /x has published up to transaction 36")
    assert "capture" not in copy.describe()
    assert published(tick=-1).describe().startswith("the master has published no transaction yet")


def test_ahead_of_the_master():
    pub = published()
    assert ahead(Target("txn", txn=37), pub) and not ahead(Target("txn", txn=36), pub)
    assert ahead(Target("time", time=NOW), pub) and not ahead(Target("time", time=NOW - timedelta(seconds=1)), pub)
    assert not ahead(Target("time", time=NOW + timedelta(days=9)), published(state=2))  # all of it is published
    assert ahead(Target("txn", txn=37), published(state=2))
    assert not ahead(Target("all"), pub)


def test_an_instant_the_timeout_cannot_cover_is_refused():
    far = "2030-01-01T00:00:00Z"
    with pytest.raises(TargetError) as caught:
        check_in_time(parse_until(far), published(), NOW, timeout=600, settle=1.0)
    cli = caught.value.cli
    assert cli.startswith("--until 2030-01-01T00:00:00Z is 1134 days from now")
    assert "the master has published up to transaction 36 (watermark 2026-11-24T11:59:59Z" in cli
    assert "capture alive" in cli
    assert "--follow" in cli and "replica.timeout" in cli and "earlier --until" in cli
    assert "replicate(until=None)" in str(caught.value) and "timeout=" in str(caught.value)
    # capture publishes an instant `settle` seconds after it: 599.5 s ahead needs 600.5 s
    with pytest.raises(TargetError):
        check_in_time(Target("time", time=NOW + timedelta(seconds=599.5)), published(), NOW, 600, 1.0)
    for fine in (NOW + timedelta(seconds=599), NOW - timedelta(days=1)):
        check_in_time(Target("time", time=fine), published(), NOW, 600, 1.0)
    check_in_time(Target("txn", txn=10**6), published(), NOW, 1, 1.0)  # an id has no time: waited for
    check_in_time(parse_until(far), published(state=2), NOW, 600, 1.0)  # a stopped master has it all


def test_a_target_capture_cannot_publish_is_refused_at_once():
    check_capture(Target("txn", txn=40), published(), "wlc capture /farm m")  # alive: waited for
    with pytest.raises(ReplicationTimeout, match="capture not started"):  # a master capture never ran on
        check_capture(Target("txn", txn=40), published(heartbeat=None), "wlc capture /farm m")
    check_capture(Target("txn", txn=30), published(heartbeat=NOW - timedelta(hours=1)), "x")  # published already
    with pytest.raises(ReplicationTimeout) as caught:
        check_capture(Target("txn", txn=40), published(heartbeat=NOW - timedelta(hours=1)), "wlc capture /farm m")
    assert "capture is not running" in caught.value.cli
    assert "capture stale since 2026-11-24T11:00:00Z" in caught.value.cli
    assert "Start capture on the master: wlc capture /farm m" in caught.value.cli
    with pytest.raises(ReplicationTimeout, match="stopped logging at transaction 36: transaction 40 will never be"):
        check_capture(Target("txn", txn=40), published(state=2), "wlc capture /farm m")


def test_a_new_replica_before_the_first_transaction_is_refused_unless_asked():
    first = (0, NOW - timedelta(hours=1))
    with pytest.raises(TargetError) as caught:
        check_not_empty(parse_until("2026-11-20"), first, published(), False, False, "m")
    cli = caught.value.cli
    assert cli.startswith(
        "--until 2026-11-20 (taken as 2026-11-20T00:00:00Z, the start of that day, UTC) is before "
        "the first transaction of master 'm' (transaction 0, committed 2026-11-24T11:00:00Z)"
    )
    assert "no table and no row" in cli and "add --empty" in cli
    assert "empty=True" in str(caught.value)
    with pytest.raises(TargetError, match="until=-1 is before the first transaction.*first snapshot"):
        check_not_empty(Target("txn", txn=-1), first, published(), True, False, "m")
    check_not_empty(Target("txn", txn=-1), first, published(), False, True, "m")  # asked for
    check_not_empty(Target("txn", txn=0), first, published(), False, False, "m")
    check_not_empty(Target("time", time=first[1]), first, published(), False, False, "m")  # inclusive
    # nothing published yet: an instant the watermark passed would hold nothing; one ahead is waited for
    nothing = published(tick=-1)
    with pytest.raises(TargetError, match="before any transaction of master 'm'"):
        check_not_empty(Target("time", time=NOW - timedelta(hours=2)), None, nothing, False, False, "m")
    check_not_empty(Target("time", time=NOW + timedelta(minutes=1)), None, nothing, False, False, "m")


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_wait_is_said_at_once_then_every_30_s_and_its_end_states_capture():
    lines, clock = [], Clock()
    wait = TargetWait(Target("txn", txn=42), 120, lines.append, clock=clock)
    wait.update(published())  # pytest captures stderr: no bar, lines instead
    assert lines == [
        "waiting for transaction 42: the master has published up to transaction 36 (watermark "
        "2026-11-24T11:59:59Z, last commit 2026-11-24T11:59:30Z, capture alive); waiting up to 120 s "
        "(replica.timeout)"
    ]
    clock.now += 29
    wait.update(published())
    assert len(lines) == 1
    clock.now += 2
    wait.update(published(tick=38))
    assert len(lines) == 2 and lines[1].startswith(
        "still waiting for transaction 42 (31 of 120 s): the master has published up to transaction 38"
    )
    end = wait.timed_out(published(tick=38), 38, cli=True)
    wait.close()
    assert (
        end.startswith(
            "waited 120 s for transaction 42; the replica is at transaction 38 and the master has "
            "published up to transaction 38"
        )
        and "capture alive" in end
    )
    assert "Is capture running" not in end and "replica.timeout" in end


def test_a_target_after_a_clean_stop_of_capture_is_refused_at_once():
    cfg = master_config(heartbeat=NOW - timedelta(seconds=5))
    cfg.capture_stopped = NOW - timedelta(seconds=4)  # Ctrl-C'd after its last heartbeat
    pub = Published.of(cfg, NOW)
    assert pub.capture == "stopped" and "capture stopped at 2026-11-24T11:59:56Z" in pub.describe()
    with pytest.raises(ReplicationTimeout, match="capture is not running") as caught:
        check_capture(Target("txn", txn=40), pub, "wlc capture /farm m")
    assert "wlc capture /farm m" in caught.value.cli


def test_a_target_carries_until_as_given_outside_its_equality():
    assert parse_until("2026-11-24").given == "2026-11-24" and parse_until(7).until == 7
    assert parse_until(7) == Target("txn", txn=7) and hash(parse_until(7)) == hash(Target("txn", txn=7))
    assert Target("txn", txn=7).until == 7 and parse_until(None).until is None  # built from its bound
    assert parse_until(parse_until("2026-11-24")).given == "2026-11-24"


def test_the_options_of_a_call_are_checked_once_before_anything_is_read():
    from wlcore.errors import ConfigError
    from wlcore.metrics import MetricsError
    from wlr.replay import ReplicateOptions

    options = ReplicateOptions.of("2026-11-24", timeout="30", tables="sales.*", metrics_port="off")
    assert options.target == parse_until("2026-11-24") and options.target.given == "2026-11-24"
    assert options.timeout == 30.0 and options.selection is not None and options.metrics_port == "off"
    assert ReplicateOptions.of().selection is None and ReplicateOptions.of().target.kind == "all"
    cfg = settings().replica  # the defaults of what the call leaves out
    assert (options.follow, options.collapse) == (cfg.follow, cfg.collapse)
    assert ReplicateOptions.of().timeout == cfg.timeout and ReplicateOptions.of(follow=0).follow is False
    with pytest.raises(TargetError):
        ReplicateOptions.of("halo")
    with pytest.raises(ConfigError, match="timeout"):
        ReplicateOptions.of(timeout="soon")
    with pytest.raises(ConfigError, match="tables"):
        ReplicateOptions.of(tables="no pattern")
    with pytest.raises(MetricsError):
        ReplicateOptions.of(metrics_port=70000)
