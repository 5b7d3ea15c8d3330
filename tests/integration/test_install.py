"""The package as a user installs it: a wheel in a fresh virtual environment outside the checkout.

The wheel is built from the checkout and installed (without dependencies) into a new
virtual environment in a temporary folder; the dependencies already installed for the test
run (pyspark, delta-spark, ...) are made visible to it by a ``.pth`` line, so nothing is
downloaded again. The installed ``wlc`` and ``wlr`` commands and a tiny replication then run
from that folder with no path into the checkout: the packaged defaults must be enough.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    import wlc, wlr
    venv = Path(sys.argv[1]).resolve()
    assert Path(wlc.__file__).resolve().is_relative_to(venv), wlc.__file__
    assert Path(wlr.__file__).resolve().is_relative_to(venv), wlr.__file__
    spark = wlc.spark_session()
    Path("farm").mkdir()  # a dbfarm is a folder made first: wlc never makes one by accident
    farm = str(Path("farm").resolve())
    m = wlc.master("m", dbfarm=farm)
    wlc.beat(0)
    path = m.table_path("s.t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id INT, v STRING) USING delta")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 1")
    last = wlc.flush()
    r = wlr.replicate("m", until=last, replica="r", dbfarm=farm)
    rows = sorted(map(tuple, r.table("s.t").collect()))
    assert rows == [(2, "b")], rows
    r.close()
    m.close()
    print("REPLICATED", wlc.__version__, rows)
""")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(venv folder, env)``: a fresh venv with the wheel of this checkout installed."""
    work = tmp_path_factory.mktemp("install")
    wheels = work / "wheels"
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "--disable-pip-version-check",
        "--wheel-dir",
        str(wheels),
        str(ROOT),
    ]
    built = subprocess.run(build, check=True, cwd=work, capture_output=True, text=True)
    # quiet: no build-backend warnings (setuptools' 50 lines on a package missing from `packages`)
    assert built.stdout + built.stderr == "", built.stdout + built.stderr
    (wheel,) = wheels.glob("wlc_wlr-*.whl")
    import wlc

    assert wheel.name.startswith(f"wlc_wlr-{wlc.__version__}-")  # pyproject.toml reads the one version
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # the test run's dependencies, after the venv's own packages (so its wlc/wlr win)
    Path(site, "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "--force-reinstall",
            str(wheel),
        ],
        check=True,
        cwd=work,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WLC_CONFIG", "WLC_DBFARM")}
    env["PYSPARK_PYTHON"] = str(py)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    run = work / "run"  # the working folder: outside the checkout
    run.mkdir()
    return venv, env, run


def test_wheel_has_defaults_commands_and_types(installed):
    venv, env, run = installed
    out = subprocess.run(
        [str(venv / "bin" / "wlr"), "--help"], cwd=run, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "replicate" in out.stdout and "usage: wlr" in out.stdout
    out = subprocess.run(
        [str(venv / "bin" / "wlc"), "--version"], cwd=run, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.startswith("wlc "), out.stderr
    files = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.resources as r; "
            "print(*(r.files(p).joinpath('py.typed').is_file() for p in ('wlc', 'wlr', 'wlcore')), "
            "r.files('wlcore').joinpath('defaults', 'wlc.yaml').is_file())",
        ],
        cwd=run,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert files.stdout.split() == ["True", "True", "True", "True"], files.stderr


@pytest.mark.spark
def test_tiny_replication_from_the_installed_package(installed):
    venv, env, run = installed
    # the working folder's config/wlc.yaml overrides the packaged defaults (short settle for a test)
    (run / "config").mkdir(exist_ok=True)
    (run / "config" / "wlc.yaml").write_text(
        "capture:\n  settle: 0.2\n  poll_interval: 0.2\nspark:\n  conf:\n    spark.driver.memory: 1g\n"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", SCRIPT, str(venv)],
        cwd=run,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "REPLICATED" in out.stdout


def test_editable_install_is_quiet(tmp_path):
    """``pip install -e .`` (make venv) prints nothing with ``--quiet``: no build-backend warnings."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "-e",
            str(ROOT),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout + out.stderr == "", out.stdout + out.stderr
