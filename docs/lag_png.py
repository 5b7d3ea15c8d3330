"""Makes docs/lag.png: a replica following a master that writes for 30 s (as the quickstart's section 4).

Run: .venv/bin/python docs/lag_png.py
"""

import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ["WLC_CONFIG"] = os.path.join(ROOT, "tests", "wlc-test.yaml")  # beat 1 s, short settle
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import wlc  # noqa: E402
import wlr  # noqa: E402

spark = wlc.spark_session()
farm = tempfile.mkdtemp(prefix="lagpng-")
m = wlc.master("shop", dbfarm=farm)
wlc.beat(0)
m.create_schema("sales")
spark.sql("CREATE TABLE sales.orders (id INT, item STRING, qty INT) USING delta TBLPROPERTIES ('wlc.key'='id')")
wlc.flush()
r = wlr.replicate("shop", dbfarm=farm)  # follows
for i in range(30):
    spark.sql(f"INSERT INTO sales.orders VALUES ({i}, 'item {i}', {i})")
    if i % 3 == 0:
        spark.sql(f"UPDATE sales.orders SET qty = qty + 1 WHERE id < {i}")
    time.sleep(0.3)
wlc.flush()
deadline = time.monotonic() + 120
while wlr.status()["lag_transactions"] and time.monotonic() < deadline:
    time.sleep(0.2)
h = wlr.lag_history("shop_replica", farm)
ax = h.plot(
    x="time",
    y="lag_seconds",
    drawstyle="steps-post",
    legend=False,
    figsize=(8, 3),
    title="replica lag behind the master (seconds), follow mode, beat 1 s",
)
ax.set_xlabel("time (UTC)")
ax.figure.tight_layout()
ax.figure.savefig(os.path.join(ROOT, "docs", "lag.png"), dpi=100)
print(h.tail(), h["lag_seconds"].max())
wlr.stop()
m.close()
