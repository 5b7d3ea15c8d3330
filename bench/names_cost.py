"""What moving a replica's SQL names costs per round: one table view and one tick record
(``CREATE OR REPLACE VIEW``, the statements :class:`wlr.catalog.ReplicaCatalog` runs), in the
in-memory session catalog and in a Hive metastore on Derby's network server (started here on
127.0.0.1 and stopped by its process id), side by side; medians of 20 each.

Run: ``.venv/bin/python bench/names_cost.py [--tables 200]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TIMED = """
    import json, statistics, time
    from wlcore.session import active_session

    spark = active_session()
    spark.sql("CREATE SCHEMA IF NOT EXISTS bench_names")
    spark.range(3).write.format("delta").mode("overwrite").save({table!r})
    pairs = ", ".join(f"'s.t{{i}}', CAST({{i}} AS BIGINT)" for i in range({tables}))
    statements = {{
        "view": "CREATE OR REPLACE VIEW bench_names.v AS SELECT * FROM delta.`{table}` VERSION AS OF 0",
        "record": "CREATE OR REPLACE VIEW bench_names.`tick` AS SELECT CAST(1 AS BIGINT) AS tick, true AS settled, "
        f"'file:/x' AS location, 'm' AS master, CAST(map({{pairs}}) AS MAP<STRING, BIGINT>) AS versions",
    }}
    out = {{}}
    for name, text in statements.items():
        spark._jsparkSession.sql(text)
        times = []
        for _ in range(20):
            started = time.perf_counter()
            spark._jsparkSession.sql(text)
            times.append(time.perf_counter() - started)
        out[name] = statistics.median(times)
    print("RESULT " + json.dumps(out))
"""


def _measure(config: str, table: str, tables: int) -> dict:
    env = dict(os.environ, WLC_CONFIG=config, PYTHONPATH=ROOT)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(TIMED.format(table=table, tables=tables))],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the measuring process failed:\n{done.stderr[-3000:]}")
    import json

    return json.loads(lines[-1][len("RESULT ") :])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200, help="tables in the tick record (default 200)")
    args = parser.parse_args()
    from tests import metastore

    with tempfile.TemporaryDirectory(prefix="wlc-names-") as tmp:
        base = yaml.safe_load(open(os.path.join(ROOT, "tests", "wlc-test.yaml")).read())
        session = os.path.join(tmp, "session.yaml")
        with open(session, "w") as fh:
            yaml.safe_dump(base, fh)
        proc, url = metastore.start(os.path.join(tmp, "derby"))
        try:
            base["spark"]["metastore"] = url
            hive = os.path.join(tmp, "hive.yaml")
            with open(hive, "w") as fh:
                yaml.safe_dump(base, fh)
            table = os.path.join(tmp, "t")
            rows = [("session catalog (in memory)", _measure(session, table, args.tables))]
            rows.append(("Hive metastore (Derby network server)", _measure(hive, table, args.tables)))
        finally:
            metastore.stop(proc)
    print(f"| catalog | one table view | tick record, {args.tables} tables |")
    print("|---|---|---|")
    for name, got in rows:
        print(f"| {name} | {got['view'] * 1000:.0f} ms | {got['record'] * 1000:.0f} ms |")
    ratio = rows[1][1]["view"] / rows[0][1]["view"]
    print(f"a view in the metastore costs {ratio:.1f}x one in the session catalog")
    return 0


if __name__ == "__main__":
    sys.exit(main())
