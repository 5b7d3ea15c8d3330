"""What capture's look at one table's log costs in an S3 bucket, by the log's length: the whole
listing it made at every scan before, against the listing from its cursor it makes now (and a
restarted capture's first look: the commit file at its cursor read and looked at, then the listing
from it), and s3fs's ``isdir`` (a whole listing) against the one-key request that finds the log;
and replay's look at a replica table's newest version, the whole listing it made for every
segment before against the listing from the checkpoint ``_last_checkpoint`` names it makes now
(a checkpoint five commits back, half Delta's interval of ten).

An S3-compatible server (moto, started here on 127.0.0.1 and stopped by its process id) holds
one table's ``_delta_log`` of ``--lengths`` commits (a commit and a checksum file each). Each
way is timed five times a length; the median and the ratio of the old way to the new are
printed. moto lists more slowly than AWS S3 (about 0.3 ms a key here); the growth with the log's
length is what carries over: a whole listing grows with it, a listing from the cursor does not.

Run: ``.venv/bin/python bench/s3_scan.py [--lengths 100,1000,3000]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", default="100,1000,3000", help="log lengths in commits, comma-separated")
    args = ap.parse_args()
    lengths = sorted(int(n) for n in args.lengths.split(","))
    work = tempfile.mkdtemp(prefix="wlc-s3-scan-")
    from tests.s3server import start, stop
    from wlcore.settings import choose_config

    proc, endpoint = start()
    try:
        cfg = os.path.join(work, "wlc.yaml")
        with open(cfg, "w") as fh:
            s3 = {"endpoint_url": endpoint, "key": "bench", "secret": "bench", "region": "us-east-1"}
            yaml.safe_dump({"storage": {"s3": s3}}, fh)
        choose_config(cfg)
        run(endpoint, lengths)
    finally:
        stop(proc)
        shutil.rmtree(work, ignore_errors=True)


def median_ms(fn, before=None) -> float:
    runs = []
    for _ in range(5):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return sorted(runs)[2] * 1000


def run(endpoint: str, lengths: list[int]) -> None:
    import boto3

    from wlcore.deltalog import latest_version, list_versions, versions_after
    from wlcore.storage import Storage

    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1"
    )
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    st = Storage.of(f"s3://{bucket}")
    table, log = f"s3://{bucket}/t", f"s3://{bucket}/t/_delta_log"

    def put(v: int) -> None:
        for ext in ("json", "crc"):
            client.put_object(Bucket=bucket, Key=f"t/_delta_log/{v:020d}.{ext}", Body=b"{}")

    print(
        f"{'log':>22}  {'whole listing':>14}  {'from cursor':>12}  {'ratio':>6}  {'restarted':>10}  {'ratio':>6}"
        f"  {'s3fs isdir':>11}  {'one key':>8}  ratio"
    )
    done = 0
    newest = []
    for n in lengths:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, range(done, n)))
        done = n
        whole = median_ms(lambda: list_versions(st, table))
        since = median_ms(lambda: versions_after(st, table, n - 2))
        cursor = f"{log}/{n - 2:020d}.json"
        resumed = median_ms(lambda: (st.stat(cursor), st.read_text(cursor), versions_after(st, table, n - 2)))
        old_isdir = median_ms(lambda: st.fs.isdir(log), before=st.fs.invalidate_cache)
        new_isdir = median_ms(lambda: st.isdir(log))
        print(
            f"{n:>6,} commits ({2 * n:>6,} files)  {whole:>11.1f} ms  {since:>9.1f} ms  {whole / since:>5.0f}x"
            f"  {resumed:>7.1f} ms  {whole / resumed:>5.0f}x"
            f"  {old_isdir:>8.1f} ms  {new_isdir:>5.1f} ms  {old_isdir / new_isdir:.0f}x"
        )
        client.put_object(Bucket=bucket, Key="t/_delta_log/_last_checkpoint", Body=f'{{"version": {n - 5}}}'.encode())
        assert latest_version(st, table) == list_versions(st, table)[-1] == n - 1
        newest.append((n, whole, median_ms(lambda: latest_version(st, table))))
        client.delete_object(Bucket=bucket, Key="t/_delta_log/_last_checkpoint")
    print(f"\n{'newest version of':>22}  {'whole listing':>14}  {'from checkpoint':>15}  ratio")
    for n, whole, pointed in newest:
        print(f"{n:>6,} commits ({2 * n:>6,} files)  {whole:>11.1f} ms  {pointed:>12.1f} ms  {whole / pointed:>4.0f}x")


if __name__ == "__main__":
    main()
