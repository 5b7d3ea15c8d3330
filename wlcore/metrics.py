"""Prometheus metrics of a process: ``/metrics`` served by the ``prometheus_client`` library.

``wlc capture``, ``wlr replicate --follow``, ``wlc ship --follow`` and in-process masters,
followers and shippers given a ``metrics_port`` (or the ``metrics.port`` setting) serve
``http://127.0.0.1:<port>/metrics``. One registry a process (prometheus_client's default, with
its ``process_*`` and ``python_*`` metrics): a process holding a master and a replica shows
both on every port it serves.

Two kinds of metrics, named by Prometheus' conventions (base units, ``_total`` counters,
``_seconds`` and ``_bytes`` suffixes; labels ``database``, ``replica``, ``level``, ``kind``,
``engine``, ``state``, whose values stay few):

* events (counters, histograms) are module-level metrics of each side (:mod:`wlc.metrics`,
  :mod:`wlr.monitor`, :mod:`wlcore.ship`), counted where the event happens;
* state (ticks, lag, heartbeats, log size) is read when Prometheus scrapes, from the objects
  alive in the process, by a :class:`Live` collector: the figures are the ones ``wlc status``
  and ``wlr status`` print, never a second bookkeeping of them.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import REGISTRY, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .errors import ConfigError

log = logging.getLogger("wlcore.metrics")

Sample = tuple[str, dict[str, str], float]  # (family, labels, value)

_SERVERS: dict[tuple[str, int], Any] = {}  # (host, port asked) -> the server
_START = threading.Lock()


class MetricsError(ConfigError):
    """``/metrics`` cannot be served: the port is taken or malformed."""


def port_of(value: int | str | None) -> int | None:
    """A metrics port as given to ``metrics_port=``, ``--metrics-port`` or ``metrics.port``.

    Args:
        value (int | str | None): a TCP port (0: any free port, said when serving); ``off``,
            ``""`` or None: no metrics (:func:`wlcore.settings.port_number`, the setting's rule).

    Returns:
        int | None: the port; None: metrics off.

    Raises:
        MetricsError: not a port number from 0 to 65535.
    """
    from .settings import port_number

    try:
        return port_number(value)
    except ValueError:
        raise MetricsError(f"metrics port {value!r}: give a port number from 0 to 65535, or off") from None


def serve(port: int | str | None, host: str | None = None) -> int | None:
    """Serve this process's metrics at ``http://<host>:<port>/metrics`` (prometheus_client's
    ``start_http_server``, a daemon thread); a port served already is served once.

    Args:
        port (int | str | None): the TCP port (0: any free one; None or ``off``: the
            ``metrics.port`` setting, whose default is off).
        host (str | None): the address to listen on (None: ``metrics.host``, 127.0.0.1).

    Returns:
        int | None: the port served (the one chosen when 0 was asked); None: metrics are off.

    Raises:
        MetricsError: the port is malformed, or taken by another process (the message names it
            and how to choose another).
    """
    from .settings import settings

    cfg = settings().metrics
    asked = port_of(port) if port is not None else cfg.port
    if asked is None:
        return None
    host = host or cfg.host
    with _START:
        server = _SERVERS.get((host, asked))
        if server is None:
            try:
                server, _thread = start_http_server(asked, addr=host, registry=REGISTRY)
            except OSError as exc:
                raise MetricsError(
                    f"cannot serve metrics on {host}:{asked}: {exc.strerror or exc} (another process serving "
                    "there?); choose another port (metrics_port= or the metrics.port setting)",
                    cli=f"cannot serve metrics on {host}:{asked}: {exc.strerror or exc} (another process serving "
                    "there?); choose another with --metrics-port",
                ) from None
            _SERVERS[(host, asked)] = server
            if asked == 0:
                _SERVERS[(host, server.server_port)] = server
    return int(server.server_port)


def stop_serving() -> None:
    """Stop every metrics server of this process (tests; a process's servers end with it)."""
    with _START:
        for server in set(_SERVERS.values()):
            server.shutdown()
            server.server_close()
        _SERVERS.clear()


@dataclass(frozen=True)
class Family:
    """A gauge read at scrape time: its name, help text and label names."""

    name: str
    help: str
    labels: tuple[str, ...]


class LiveSource(Protocol):
    """An object whose state :class:`Live` reads at scrape time."""

    def samples(self) -> Iterable[Sample]:
        """``(family, labels, value)`` of every gauge it has now."""
        ...


class Live(Collector):
    """Gauges read from live objects when Prometheus scrapes (registered in the process's
    registry at the first :meth:`add`; objects are held weakly and dropped by :meth:`remove`).

    Args:
        families: the gauges the objects report.
    """

    def __init__(self, families: Iterable[Family]) -> None:
        self.families = {f.name: f for f in families}
        self._sources: weakref.WeakSet = weakref.WeakSet()
        self._registered = False
        self._lock = threading.Lock()

    def add(self, source: LiveSource) -> None:
        """Report ``source`` from now on (until :meth:`remove` or its end)."""
        with self._lock:
            if not self._registered:
                REGISTRY.register(self)
                self._registered = True
            self._sources.add(source)

    def remove(self, source: LiveSource) -> None:
        """Stop reporting ``source``."""
        with self._lock:
            self._sources.discard(source)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families, without values (prometheus_client checks names against them)."""
        for f in self.families.values():
            yield GaugeMetricFamily(f.name, f.help, labels=list(f.labels))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Every family with the values its sources give now; a source that cannot be read
        (a file being replaced, a store out of reach) is logged and left out of this scrape."""
        out = {f.name: GaugeMetricFamily(f.name, f.help, labels=list(f.labels)) for f in self.families.values()}
        with self._lock:
            sources = list(self._sources)
        for source in sources:
            try:
                samples = list(source.samples())
            except Exception as exc:  # one unreadable object must not fail the whole scrape
                log.warning("metrics of %r left out of this scrape: %s", source, exc)
                continue
            for name, labels, value in samples:
                family = self.families[name]
                out[name].add_metric([labels[k] for k in family.labels], float(value))
        yield from out.values()


def once(factory: Callable[[], Any]) -> Callable[[], Any]:
    """``factory`` called at most once (module-level metrics made at first use, so importing a
    module registers nothing)."""
    made: list[Any] = []
    lock = threading.Lock()

    def get() -> Any:
        with lock:
            if not made:
                made.append(factory())
            return made[0]

    return get


class LogUsage:
    """Batches and bytes of a log folder by level (0, 1, 2), for ``*_log_batches`` and
    ``*_log_bytes``: one listing a scrape; a published batch is never changed, so each one's size
    is read once (:meth:`wlcore.storage.Storage.tree_size`) and remembered while it is there.

    Args:
        storage: the storage holding the log folder.
        logs: the log folder (path or URL; ``wlc.config``'s ``logs``).
        dbname: the master database's name (its batches are ``<dbname>_<n>`` and
            ``<dbname>_L<level>_<first>_<last>``).
    """

    def __init__(self, storage: Any, logs: str, dbname: str) -> None:
        self.storage, self.logs, self.dbname = storage, logs, dbname
        self._sizes: dict[str, int] = {}

    def level_of(self, name: str) -> int | None:
        """The level of the batch folder ``name`` (None: not one of this database's batches)."""
        prefix = self.dbname + "_"
        if not name.startswith(prefix):
            return None
        rest = name[len(prefix) :]
        if rest.isdigit():
            return 0
        if rest[:1] == "L" and rest[1:2].isdigit() and rest[2:3] == "_":
            return int(rest[1])
        return None

    def by_level(self) -> dict[int, tuple[int, int]]:
        """``{level: (batches, bytes)}`` for levels 0, 1 and 2 (zeros when none)."""
        from .storage import Storage

        logs = self.logs
        out = {level: [0, 0] for level in (0, 1, 2)}
        seen: dict[str, int] = {}
        for name in self.storage.published(logs) if logs else []:
            level = self.level_of(name)
            if level is None or level not in out:
                continue
            size = self._sizes.get(name)
            if size is None:
                size = self.storage.tree_size(Storage.join(logs, name))
            seen[name] = size
            out[level][0] += 1
            out[level][1] += size
        self._sizes = seen
        return {level: (n, size) for level, (n, size) in out.items()}
