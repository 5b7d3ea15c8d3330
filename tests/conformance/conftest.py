"""One conformance run per test session.

Every scenario's statements run once, on master ``live``, whose capture reads each version
as soon as it commits. Master ``late`` holds a copy of ``live``'s table folders (commit
files with their times, data and change files, what VACUUM and log clean-up removed removed
too), brought over while its capture is stopped: after the scenarios' ``before`` statements
(captured), then after all their statements; so its capture reads every version long after
it was written, as a capture stopped while the statements ran and started afterwards would.
Each master is replayed with collapse on and off, and every replica table compared with its
master's.

``WLC_CONFORMANCE=name,name`` runs only those scenarios (for working on one);
``WLC_CONFORMANCE_THREADS`` (default 3) scenarios are written at once. Its summary line (each
phase's seconds, each replay's, the slowest scenarios to write) shows with
``pytest -s -p no:xdist tests/conformance``."""

from __future__ import annotations

import os
import shutil
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

from .harness import MODES, SCHEMA, Ctx, describe, differences
from .scenarios_definitions import SCENARIOS as DEFINITIONS
from .scenarios_features import SCENARIOS as FEATURES
from .scenarios_foreign import SCENARIOS as FOREIGN
from .scenarios_limits import SCENARIOS as LIMITS
from .scenarios_types import SCENARIOS as TYPES
from .scenarios_writers import SCENARIOS as WRITERS
from .scenarios_writes import SCENARIOS as WRITES

ALL = TYPES + WRITES + FEATURES + WRITERS + LIMITS + DEFINITIONS + FOREIGN
COLLAPSE = {"collapsed": True, "per_txn": False}
THREADS = int(os.environ.get("WLC_CONFORMANCE_THREADS", "3"))


def chosen():
    names = [n for n in os.environ.get("WLC_CONFORMANCE", "").split(",") if n]
    return [s for s in ALL if not names or s.name in names]


def feed_warnings(seen) -> list[str]:
    """The texts of the ``wlc.ChangeFeedWarning`` among recorded warnings."""
    from wlc import ChangeFeedWarning

    return [str(w.message) for w in seen if issubclass(w.category, ChangeFeedWarning)]


def sync(src: str, dst: str) -> None:
    """Make folder ``dst`` hold what ``src`` holds: files copied with their modification
    times (commit times of tables without In-Commit Timestamps), files gone from ``src``
    removed from ``dst``."""
    for root, _dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            a, b = os.path.join(root, f), os.path.join(dst, rel, f)
            sa = os.stat(a)
            if not os.path.exists(b) or (os.stat(b).st_size, os.stat(b).st_mtime_ns) != (sa.st_size, sa.st_mtime_ns):
                shutil.copy2(a, b)
    for root, _dirs, files in os.walk(dst, topdown=False):
        rel = os.path.relpath(root, dst)
        for f in files:
            if not os.path.exists(os.path.join(src, rel, f)):
                os.remove(os.path.join(root, f))
        if not os.path.exists(os.path.join(src, rel)):
            shutil.rmtree(root, ignore_errors=True)


class Run:
    """The conformance run: masters, replicas, and what differs, by (scenario, mode, replay)."""

    def __init__(self, spark, farm: str):
        self.spark, self.farm = spark, farm
        self.masters: dict = {}
        self.failed: dict[str, str] = {}  # scenario: why its statements failed
        self.replay_failed: dict[tuple[str, str, str], list[str]] = {}  # (scenario, mode, replay): causes
        self.warned: dict[str, list[str]] = {m: [] for m in MODES}  # ChangeFeedWarning texts by master
        self.seconds: dict[str, float] = {}  # by phase (and each replay's own)
        self.scenario_seconds: dict[str, float] = {}  # writing each scenario's statements
        self.replica_of: dict[tuple[str, str, str], str] = {}  # (scenario, mode, replay): the replica holding it
        self.described: dict[str, dict] = {}  # {master table folder: describe()}

    def ctx(self, scenario) -> Ctx:
        return Ctx(self.spark, self.masters["live"], "live", SCHEMA, scenario.name, self.farm)

    def replica(self, mode: str, replay: str) -> str:
        return f"{mode}_{replay}"

    def _copy_to_late(self) -> None:
        sync(os.path.join(self.farm, "live", SCHEMA), os.path.join(self.farm, "late", SCHEMA))

    def build(self, scenarios) -> None:
        """Write every scenario (``THREADS`` at a time: tables are independent, as on a real
        master), capture on both masters, then replay four ways at once."""
        from wlc.master import Master

        def start(name: str):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "already in master mode": capture comes back
                m = Master(name, dbfarm=self.farm, capture=False).start()
            m.beat(0)
            self.masters[name] = m
            return m

        t0 = time.monotonic()
        start("live").create_schema(SCHEMA)
        start("late")
        with ThreadPoolExecutor(THREADS, thread_name_prefix="conformance") as pool:
            list(pool.map(lambda s: self._guard(s, s.before), [s for s in scenarios if s.before is not None]))
            self._copy_to_late()
            self.masters["late"].flush()  # what capture knew before it went away
            self.masters["late"].close()
            list(pool.map(lambda s: self._guard(s, s.run), scenarios))
        self.seconds["write"] = time.monotonic() - t0
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            self.masters["live"].flush()
        self.warned["live"] += feed_warnings(seen)
        # late's capture catches up (it was away while the statements ran) before any replay runs:
        # warnings.catch_warnings is process-wide, and a replay thread's library code entering its
        # own catch_warnings meanwhile would lose late's warnings (seen in a run)
        self._copy_to_late()  # everything written while late's capture was away
        start("late")
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            self.masters["late"].flush()
        self.warned["late"] += feed_warnings(seen)
        self.seconds["late capture"] = time.monotonic() - t0
        with ThreadPoolExecutor(4, thread_name_prefix="conformance-replay") as pool:
            jobs = [
                pool.submit(self._replicate, mode, replay, collapse, scenarios)
                for mode in ("live", "late")
                for replay, collapse in COLLAPSE.items()
            ]
            for job in jobs:
                job.result()
        self.seconds["replay"] = time.monotonic() - t0
        t0 = time.monotonic()
        with ThreadPoolExecutor(THREADS, thread_name_prefix="conformance-describe") as pool:
            # every table a test compares, described ahead (one thread leaves a core idle)
            tables = {
                path: s
                for s in scenarios
                for mode in MODES
                for replay in COLLAPSE
                for path in self._tables(s, mode, replay)
            }
            list(pool.map(lambda job: self._describe(*job, ahead=True), tables.items()))
        self.seconds["describe"] = time.monotonic() - t0

    def _guard(self, scenario, step) -> None:
        if step is None or scenario.name in self.failed:
            return
        t0 = time.monotonic()
        try:
            step(self.ctx(scenario))
            self.scenario_seconds[scenario.name] = self.scenario_seconds.get(scenario.name, 0) + time.monotonic() - t0
        except Exception as exc:  # noqa: BLE001 (the scenario's tests report it; the others go on)
            from wlcore.errors import first_line

            self.failed[scenario.name] = f"{type(exc).__name__}: {first_line(exc)}"
            print(f"conformance: {scenario.name} failed: {self.failed[scenario.name]}")

    def _replicate(self, mode: str, replay: str, collapse: bool, scenarios) -> None:
        """Replay everything. A failed transaction is recorded for its table, and a new
        replica without the failed tables is made, so every other table is still replayed
        and compared (and the failure reported once, by its scenario's tests)."""
        t0 = time.monotonic()
        try:
            self._replicate_all(mode, replay, collapse, scenarios)
        finally:
            self.seconds[f"replay {mode} {replay}"] = time.monotonic() - t0

    def _replicate_all(self, mode: str, replay: str, collapse: bool, scenarios) -> None:
        import wlr

        left_out: set[str] = set()
        for attempt in range(len(scenarios) + 1):
            name = self.replica(mode, replay) + (f"_{attempt}" if attempt else "")
            tables = [f"{SCHEMA}.{s.name}" for s in scenarios if s.name not in left_out]
            try:
                wlr.Replica(mode, replica=name, dbfarm=self.farm).replicate(
                    follow=False, collapse=collapse, tables=tables if left_out else None
                )
                for s in scenarios:
                    self.replica_of.setdefault((s.name, mode, replay), name)
                return
            except wlr.ReplicationError as exc:
                if exc.table is None:
                    raise
                table = exc.table.split(".", 1)[1]
                print(f"conformance: {name}: {table}: {exc.cause[:3000]}")
                self.replay_failed.setdefault((table, mode, replay), []).append(exc.cause[:3000])
                self.replica_of[(table, mode, replay)] = name
                left_out.add(table)
        raise AssertionError(f"replica {self.replica(mode, replay)}: every table failed")

    def differences(self, scenario, mode: str, replay: str) -> list[str]:
        out = []
        if scenario.name in self.failed:
            out.append(f"the scenario's statements failed: {self.failed[scenario.name]}")
        out += [f"replay failed: {c}" for c in self.replay_failed.get((scenario.name, mode, replay), [])]
        master, replica = self._tables(scenario, mode, replay)
        if not os.path.isdir(os.path.join(master, "_delta_log")):
            return out + ["the master table does not exist"]
        if not os.path.isdir(os.path.join(replica, "_delta_log")):
            return out + ["the replica table does not exist"]
        for path in (master, replica):
            self._describe(path, scenario)
        return out + differences(self.described[master], self.described[replica])

    def _tables(self, scenario, mode: str, replay: str) -> tuple[str, str]:
        """The folders of the master table and of the replica table compared with it."""
        replica = self.replica_of.get((scenario.name, mode, replay), self.replica(mode, replay))
        return (
            os.path.join(self.farm, mode, SCHEMA, scenario.name),
            os.path.join(self.farm, replica, SCHEMA, scenario.name),
        )

    def _describe(self, path: str, scenario, ahead: bool = False) -> None:
        """Describe the table in ``path`` once (a master table is compared with two replicas);
        a table that does not exist, or cannot be described ahead, is left to its test to report."""
        if path not in self.described and os.path.isdir(os.path.join(path, "_delta_log")):
            try:
                self.described[path] = describe(self.spark, path, scenario.rs_reads)
            except Exception:  # noqa: BLE001 (described again by the test, which reports it)
                if not ahead:
                    raise


@pytest.fixture(scope="session")
def conformance(spark, tmp_path_factory):
    """The conformance run (built once, at its first test)."""
    farm = str(tmp_path_factory.mktemp("conformance"))
    run = Run(spark, farm)
    run.build(chosen())
    slow = sorted(run.scenario_seconds.items(), key=lambda kv: -kv[1])[:5]
    print(
        f"\nconformance: {len(chosen())} scenarios; "
        + ", ".join(f"{k} {v:.0f} s" for k, v in run.seconds.items())
        + "; slowest to write: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in slow)
    )
    yield run
    for m in run.masters.values():
        m.close()
    spark.sql(f"DROP SCHEMA IF EXISTS `{SCHEMA}` CASCADE")
