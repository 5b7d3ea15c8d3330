"""What shipping costs, and what reading shipped logs costs a replica, side by side.

A master writes ``--txns`` transactions of ``--rows`` rows each (beat 0: a batch each). Then:

- ``wlc.ship`` to another local folder, and to an S3-compatible server (moto, started here
  on 127.0.0.1 and stopped by its process id): seconds, MB, MB/s; a second pass (nothing new)
  shows the fixed cost of a pass (listings);
- a new replica catches up (grouped replay) from the master's own folder, from the shipped
  folder and from the object store (Spark reading s3a): seconds and ratio to the master's
  folder, each end state checked against the master.

Run: ``.venv/bin/python bench/ship.py [--txns 60] [--rows 2000]`` (``make bench-ship``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--txns", type=int, default=60, help="master transactions (a batch each)")
    ap.add_argument("--rows", type=int, default=2000, help="rows each transaction inserts")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="wlc-ship-bench-")
    from tests.s3server import start, stop
    from wlcore.settings import choose_config

    proc, endpoint = start()
    try:
        cfg = os.path.join(work, "wlc.yaml")
        with open(cfg, "w") as fh:
            yaml.safe_dump(
                {
                    "storage": {
                        "s3": {"endpoint_url": endpoint, "key": "bench", "secret": "bench", "region": "us-east-1"}
                    },
                    "capture": {"settle": 0.2, "poll_interval": 0.2},
                },
                fh,
            )
        choose_config(cfg)  # this process's settings from now on (nothing written to os.environ)
        run(work, endpoint, args)
    finally:
        stop(proc)
        shutil.rmtree(work, ignore_errors=True)


def run(work: str, endpoint: str, args) -> None:
    import boto3

    import wlc
    import wlr

    farm = os.path.join(work, "farm")
    spark = wlc.spark_session()
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
    ).create_bucket(Bucket=bucket)
    m = wlc.master("m", dbfarm=farm)
    wlc.beat(0)
    t = m.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{t}` (id BIGINT, v STRING, n DOUBLE) USING delta TBLPROPERTIES ('wlc.key' = 'id')")
    print(f"== master: {args.txns} transactions of {args.rows:,} rows", flush=True)
    for i in range(args.txns):
        lo = i * args.rows
        spark.range(lo, lo + args.rows).selectExpr("id", "concat('row ', id) AS v", "rand() AS n").write.format(
            "delta"
        ).mode("append").save(t)
    wlc.flush()
    expected = sorted(tuple(r) for r in spark.read.format("delta").load(t).collect())
    out = []
    dests = {"folder": os.path.join(work, "shipped"), "s3": f"s3://{bucket}/m"}
    for kind, dest in dests.items():
        first = wlc.ship(dest)
        again = wlc.ship(dest)
        out.append((kind, first, again))
    m.close()
    print(
        f"{'ship to':<8} {'batches':>7} {'MB':>7} {'seconds':>8} {'MB/s':>6} {'per batch (s)':>13}"
        f" {'pass, nothing new (s)':>21}"
    )
    for kind, first, again in out:
        print(
            f"{kind:<8} {len(first.batches):>7} {first.bytes / 1e6:>7.1f} {first.seconds:>8.2f}"
            f" {first.bytes / 1e6 / max(first.seconds, 1e-9):>6.1f} {first.seconds / max(len(first.batches), 1):>13.3f}"
            f" {again.seconds:>21.2f}"
        )
    times = {}
    # the first s3a use loads the AWS SDK and opens the bucket: "s3 again" is a second replica, warm
    for kind, logs in (("master", None), *dests.items(), ("s3 again", dests["s3"])):
        started = time.monotonic()
        rep = wlr.replicate(
            m, replica="r_" + kind.replace(" ", "_"), dbfarm=os.path.join(work, "replicas"), logs=logs, follow=False
        )
        times[kind] = time.monotonic() - started
        ok = sorted(tuple(r) for r in rep.table("s.t").collect()) == expected
        print(f"  replica from {kind}: {times[kind]:.1f} s, equal to master: {'yes' if ok else 'NO'}", flush=True)
    base = times["master"]
    print(
        "SUMMARY replica catch-up: "
        + "; ".join(f"{k} {v:.1f} s (x{v / base:.2f})" for k, v in times.items())
        + f"; ship {out[0][1].bytes / 1e6:.1f} MB: folder {out[0][1].seconds:.1f} s, s3 {out[1][1].seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
