"""Run the notebooks in notebooks/ end to end in a Jupyter kernel of the project's venv.

Each notebook starts its own Spark JVM inside the kernel (it cannot share the test session's);
the kernel inherits WLC_DBFARM (a fresh folder per test) and WLC_CONFIG from this process.
A failing cell raises nbclient's CellExecutionError, which fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
KERNEL = "wlc-venv"


def _ensure_kernel() -> None:
    """Register the ``wlc-venv`` kernel (this interpreter) when it is missing, or when it
    names another interpreter (a kernel registered from another checkout of the project)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        if KernelSpecManager().get_kernel_spec(KERNEL).argv[0] == sys.executable:
            return
    except NoSuchKernel:
        pass
    subprocess.run(
        [sys.executable, "-m", "ipykernel", "install", "--user", "--name", KERNEL, "--display-name", "wlc (.venv)"],
        check=True,
        capture_output=True,
    )


def _execute(name: str, workdir: Path) -> None:
    # the kernel imports wlc and wlr from this checkout (not another one installed in the venv)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        f"{name}.ipynb is saved with outputs; clear them before committing"
    )
    client = nbclient.NotebookClient(
        nb, timeout=600, startup_timeout=300, kernel_name=KERNEL, resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell


@pytest.mark.spark
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", ["quickstart", "point_in_time_recovery"])
def test_notebook_runs(name, tmp_path, monkeypatch):
    _ensure_kernel()
    farm = tmp_path / "dbfarm"
    farm.mkdir()
    workdir = tmp_path / "run"
    workdir.mkdir()
    monkeypatch.setenv("WLC_DBFARM", str(farm))
    monkeypatch.setenv("WLC_CONFIG", str(ROOT / "tests" / "wlc-test.yaml"))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    _execute(name, workdir)

    # the notebook used the dbfarm given to it, not a temp folder of its own
    assert (farm / "shop" / "wlc.config").is_file()
    replica = "shop_replica" if name == "quickstart" else "shop_recovered"
    assert (farm / replica / "wlr.config").is_file()


@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_shipping_notebook_runs(s3, tmp_path, monkeypatch):
    """The shipping notebook against the test's S3-compatible server (``storage.s3`` from
    the ``s3`` fixture's WLC_CONFIG): master here, logs in the bucket, replicas elsewhere."""
    _ensure_kernel()
    farm, far, workdir = tmp_path / "dbfarm", tmp_path / "far", tmp_path / "run"
    for d in (farm, far, workdir):
        d.mkdir()
    monkeypatch.setenv("WLC_DBFARM", str(farm))
    monkeypatch.setenv("WLC_FAR_DBFARM", str(far))
    monkeypatch.setenv("WLC_SHIP_TO", f"{s3}/shop")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    _execute("shipping", workdir)
    assert (farm / "shop" / "wlc.config").is_file()
    assert (far / "shop_far" / "wlr.config").is_file() and (far / "shop_eu" / "wlr.config").is_file()
    assert not (farm / "shop_far").exists()
    from wlcore.storage import Storage

    assert Storage.of(s3).exists(f"{s3}/shop/wlc.config")
