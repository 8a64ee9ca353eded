"""Read a running drkit process's Prometheus metrics (tests only)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
    """Every sample at ``http://127.0.0.1:<port>/metrics``; None when nothing answers."""
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
    except OSError:
        return None
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = float(sample.value)
    return out


def metric(port: int, name: str, **labels: str) -> float | None:
    """The sum of samples named ``name`` whose labels include ``labels`` (None: unreachable)."""
    samples = scrape(port)
    if samples is None:
        return None
    wanted = set(labels.items())
    return sum(
        value for (sample, have), value in samples.items() if sample == name and wanted <= have
    )
