"""Scraping ``/metrics`` as Prometheus does, parsed by prometheus_client's own parser."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset], float]


def scrape(port: int, host: str = "127.0.0.1") -> Samples:
    """Every sample served at ``http://host:port/metrics``: ``{(sample name, labels): value}``."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, default: float | None = None, **labels: str) -> float:
    """The value of sample ``name`` whose labels include ``labels`` (the only one such).

    Raises:
        AssertionError: none or several samples match (and no ``default`` is given for none).
    """
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]
    if not found and default is not None:
        return default
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples match; names served: " + ", ".join(
        sorted({n for n, _ in samples if n.startswith(name.split("_")[0])})
    )
    return found[0]
