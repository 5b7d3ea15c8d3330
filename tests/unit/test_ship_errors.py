"""``wlc ship`` refusals said as one ``error:`` line (no Spark: shipping copies files)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ship_to_a_bucket_that_does_not_exist_names_it_and_the_fix(s3, tmp_path):
    (tmp_path / "m" / "wlc_logs").mkdir(parents=True)
    (tmp_path / "m" / "wlc.config").write_text("state=1\ndbid=abc\ntick=-1\nbatches=0\n")
    missing = f"{s3}-missing"  # the server has no such bucket
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "wlc", "ship", str(tmp_path), "m", f"{missing}/shipped/m"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    bucket = missing.removeprefix("s3://")
    assert out.returncode == 3, out.stderr  # not found
    assert "Traceback" not in out.stderr and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"error: the bucket {bucket} does not exist") and "create the bucket" in line, line
    assert "aws s3 mb s3://" + bucket in line, line
