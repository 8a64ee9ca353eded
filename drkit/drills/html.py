"""Drill reports as self-contained HTML pages: one page per drill, and a trend page over drills.

The pages need nothing but the file itself: the CSS is inline, there is no JavaScript, and the
plots are drawn with matplotlib (``matplotlib.figure.Figure`` directly, never pyplot, so no
global figure registry and no GUI backend) and embedded as inline SVG.  Every ``id`` inside an
embedded SVG is renamed to ``<plot id>-<n>`` so the plots of one page cannot collide with each
other, and the output does not depend on matplotlib's random id salt: the same report renders
to the same page.

Wherever there is nothing to plot (no samples, nothing lost, no move made, no events) the page
says so in words instead of showing an empty plot; the ``.plot`` element keeps its id either
way.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from drkit.drills.measure import objectives
from drkit.drills.report import DrillReport, Event, Verdict
from drkit.drills.summary import LIGHT_LOAD, fault_facts, report_document, summary, wall_clock

if TYPE_CHECKING:  # matplotlib (about a second to import) only when a page is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

GOOD_VERDICTS = frozenset({Verdict.POLICY_MET, Verdict.READY})

# Timeline events drawn as vertical lines over the lag and throughput plot: kind -> (label, colour).
MARKED_EVENTS: dict[str, tuple[str, str]] = {
    "fault_injected": ("fault", "#c0392b"),
    "source_unavailable": ("detected", "#d68910"),
    "failover_started": ("failover started", "#2874a6"),
    "pointer_moved": ("pointer moved", "#1e8449"),
    "clients_resumed": ("clients resumed", "#7d3c98"),
}

# The four parts of the RTO: (label, attribute of RtoBreakdown, colour).
RTO_PARTS: tuple[tuple[str, str, str], ...] = (
    ("detection", "detection_s", "#d68910"),
    ("decision", "decision_s", "#a04000"),
    ("execution", "execution_s", "#2874a6"),
    ("client resume", "client_resume_s", "#7d3c98"),
)

_OTHER_EVENT = "#5b6472"
_LOSS = "#c0392b"
_GOOD = "#1e8449"
_INK = "#1d2430"
_UNMEASURED = "#d5d8dc"  # samples the drill could not measure
_GRID = "#d9dde3"


# --- formatting (also the template filters) -------------------------------------------------


def format_seconds(value: float | None) -> str:
    """``12.5 s``, ``18.25 s``, ``120.0 s``: one or two decimals (as many as the value needs,
    rounded to two), thousands separated; ``-`` for None."""
    if value is None:
        return "-"
    text = f"{value:,.2f}"
    if text.endswith("0"):
        text = text[:-1]
    return f"{text} s"


def format_count(value: int | None) -> str:
    """``12,345``; ``-`` for None."""
    if value is None:
        return "-"
    return f"{value:,}"


def format_bytes(value: int) -> str:
    """``512 B`` below a KiB, else the exact count and a binary-prefixed size:
    ``37,376 B (36.5 KiB)``."""
    if abs(value) < 1024:
        return f"{value:,} B"
    size = float(value)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if abs(size) < 1024 or unit == "TiB":
            break
    return f"{value:,} B ({size:,.1f} {unit})"


def format_plain(value: Any) -> str:
    """A free-form value (from ``accounting`` or ``failover_run``) as one line of text."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _mpl_text(text: str) -> str:
    """Text as matplotlib should print it: ``$`` escaped so it never starts math mode."""
    return text.replace("$", r"\$")


# --- SVG embedding --------------------------------------------------------------------------

_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)
_COMMENT = re.compile(r"\s*<!--.*?-->", re.DOTALL)
_ID = re.compile(r'\bid="([^"]+)"')
_REFERENCE = re.compile(r'(href="#|url\(#)([^")]+)')


def _svg(figure: Figure, prefix: str) -> Markup:
    """The figure as inline SVG markup: no XML prolog, doctype, metadata or comments, and every
    id renamed ``<prefix>-<n>`` in order of first appearance (references follow)."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    figure.clear()
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = _METADATA.sub("", text, count=1)
    text = _COMMENT.sub("", text)
    names: dict[str, str] = {}
    for match in _ID.finditer(text):
        names.setdefault(match.group(1), f"{prefix}-{len(names) + 1}")
    text = _ID.sub(lambda m: f'id="{names[m.group(1)]}"', text)
    text = _REFERENCE.sub(lambda m: m.group(1) + names.get(m.group(2), m.group(2)), text)
    return Markup(text.strip())  # matplotlib's own SVG, its text XML-escaped


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained", facecolor="white")
    return figure


def _style(ax: Axes) -> None:
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(labelsize=8, colors=_INK)
    ax.grid(axis="both", color=_GRID, linewidth=0.6)
    ax.set_axisbelow(True)


# --- plots ----------------------------------------------------------------------------------


def _rto_plot(report: DrillReport) -> Markup | None:
    """One horizontal bar, stacked from the four RTO parts, with the RTO target as a line."""
    rto = report.rto
    if rto is None:
        return None
    target = report.targets.rto_s
    width = max(rto.total_s, target) * 1.04 or 1.0
    figure = _figure(8, 1.9)
    ax = figure.add_subplot()
    left = 0.0
    for label, attribute, colour in RTO_PARTS:
        value = float(getattr(rto, attribute))
        ax.barh(
            0, value, left=left, height=0.6, color=colour, label=f"{label} {format_seconds(value)}"
        )
        if value >= 0.07 * width:
            ax.text(
                left + value / 2,
                0,
                format_seconds(value),
                ha="center",
                va="center",
                color="white",
                fontsize=8,
                fontweight="bold",
            )
        left += value
    ax.axvline(
        target, color=_INK, linestyle="--", linewidth=1.2, label=f"target {format_seconds(target)}"
    )
    ax.set_xlim(0, width)
    ax.set_ylim(-0.5, 0.5)
    ax.set_yticks([])
    ax.set_xlabel(f"seconds (total {format_seconds(rto.total_s)})", fontsize=8)
    _style(ax)
    ax.grid(axis="y", visible=False)
    figure.legend(loc="outside lower center", ncols=5, fontsize=8, frameon=False)
    return _svg(figure, "plot-rto")


def _rpo_plot(report: DrillReport) -> Markup | None:
    """Records lost per partition, as bars; None when nothing was lost."""
    if report.rpo_records == 0:
        return None
    topics = {p.topic for p in report.rpo}
    if len(topics) == 1:
        labels = [str(p.partition) for p in report.rpo]
        axis_label = f"partition of {next(iter(topics))}"
    else:
        labels = [f"{p.topic}[{p.partition}]" for p in report.rpo]
        axis_label = "partition"
    count = len(labels)
    figure = _figure(8, 2.6)
    ax = figure.add_subplot()
    positions = list(range(count))
    ax.bar(positions, [p.records for p in report.rpo], color=_LOSS, width=0.7)
    rotation = 0 if count <= 16 and len(topics) == 1 else 90
    ax.set_xticks(
        positions,
        [_mpl_text(label) for label in labels],
        rotation=rotation,
        fontsize=8 if count <= 24 else 6,
    )
    ax.set_xlim(-0.6, count - 0.4)
    ax.set_xlabel(_mpl_text(axis_label), fontsize=8)
    ax.set_ylabel("records lost", fontsize=8)
    _style(ax)
    ax.grid(axis="x", visible=False)
    return _svg(figure, "plot-rpo")


def _aligned(
    times: Sequence[float], values: Sequence[float | None]
) -> tuple[list[float], list[float]]:
    """The samples both sequences have (a shorter one is not padded); an unmeasured sample is
    NaN, which matplotlib leaves out: a gap, not a 0."""
    size = min(len(times), len(values))
    return list(times[:size]), [math.nan if v is None else float(v) for v in values[:size]]


def _shade_unmeasured(ax: Axes, t: Sequence[float], values: Sequence[float]) -> None:
    """Grey bands where the samples were not measured, labelled once."""
    label: str | None = "not measured"
    for i, value in enumerate(values):
        if math.isnan(value):
            end = t[i + 1] if i + 1 < len(t) else t[i]
            ax.axvspan(t[i], end, color=_UNMEASURED, linewidth=0, label=label)
            label = None


def _mark_events(axes: Sequence[Axes], timeline: Sequence[Event]) -> None:
    labelled: set[str] = set()
    for event in timeline:
        if event.kind not in MARKED_EVENTS:
            continue
        label, colour = MARKED_EVENTS[event.kind]
        for index, ax in enumerate(axes):
            first = index == 0 and event.kind not in labelled
            ax.axvline(
                event.at_s,
                color=colour,
                linestyle=":",
                linewidth=1.4,
                label=label if first else None,
            )
        labelled.add(event.kind)


def _series_plot(report: DrillReport) -> Markup | None:
    """Lag (top) and produced/copied per second (bottom) over time, events as vertical lines."""
    series = report.series
    if not series.t:
        return None
    figure = _figure(8, 4.2)
    lag_ax, rate_ax = figure.subplots(2, 1, sharex=True)
    t, lag = _aligned(series.t, series.lag)
    if lag:
        lag_ax.fill_between(t, lag, step="post", color="#aed6f1", linewidth=0)
        lag_ax.plot(t, lag, drawstyle="steps-post", color="#2874a6", linewidth=1.2, label="lag")
        _shade_unmeasured(lag_ax, t, lag)
    lag_ax.set_ylabel("lag (records)", fontsize=8)
    t, produced = _aligned(series.t, series.produced_per_s)
    if produced:
        rate_ax.plot(t, produced, color=_INK, linewidth=1.2, label="produced / s")
    t, copied = _aligned(series.t, series.copied_per_s)
    if copied:
        rate_ax.plot(t, copied, color="#1e8449", linewidth=1.2, linestyle="--", label="copied / s")
    rate_ax.set_ylabel("records / s", fontsize=8)
    rate_ax.set_xlabel("seconds since the drill started", fontsize=8)
    _mark_events((lag_ax, rate_ax), report.timeline)
    for ax in (lag_ax, rate_ax):
        _style(ax)
        ax.set_ylim(bottom=0)
    handles, labels = lag_ax.get_legend_handles_labels()
    more_handles, more_labels = rate_ax.get_legend_handles_labels()
    if handles or more_handles:
        figure.legend(
            handles + more_handles,
            labels + more_labels,
            loc="outside lower center",
            ncols=4,
            fontsize=8,
            frameon=False,
        )
    return _svg(figure, "plot-series")


def _timeline_plot(report: DrillReport) -> Markup | None:
    """Events as points on a time axis, one row per kind (in order of first occurrence); None
    for fewer than two events - one point on an axis says nothing the events table does not,
    and drawing it costs a readiness check that found a cluster down most of its second."""
    if len(report.timeline) < 2:
        return None
    kinds = list(dict.fromkeys(event.kind for event in report.timeline))
    rows = {kind: index for index, kind in enumerate(kinds)}
    figure = _figure(8, max(1.6, 0.7 + 0.26 * len(kinds)))
    ax = figure.add_subplot()
    for kind in kinds:
        times = [event.at_s for event in report.timeline if event.kind == kind]
        colour = MARKED_EVENTS.get(kind, ("", _OTHER_EVENT))[1]
        ax.scatter(times, [rows[kind]] * len(times), s=28, color=colour, zorder=3)
    ax.set_yticks(list(rows.values()), [_mpl_text(kind) for kind in kinds], fontsize=8)
    ax.set_ylim(len(kinds) - 0.5, -0.5)
    ax.set_xlabel("seconds since the drill started", fontsize=8)
    _style(ax)
    return _svg(figure, "plot-timeline")


def _started_key(report: DrillReport) -> tuple[float, str, str]:
    """Sort key: the start time (ISO 8601; naive means UTC), then the raw text and id."""
    try:
        started = datetime.fromisoformat(report.started_at)
    except ValueError:
        return (math.inf, report.started_at, report.id)
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return (started.timestamp(), report.started_at, report.id)


def records_axis_top(values: Sequence[int]) -> float:
    """The top of a record-count axis that starts at 0: room above the highest bar, and a
    1-record scale when every value is 0."""
    return max(1, max(values, default=0)) * 1.1


def _trend_plot(reports: Sequence[DrillReport]) -> Markup | None:
    """RTO total (with its target) and RPO records per drill, drills in time order."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    if not reports:
        return None
    count = len(reports)
    positions = list(range(count))
    figure = _figure(8, 3.8)
    rto_ax, rpo_ax = figure.subplots(2, 1, sharex=True)
    rto = [r.rto.total_s if r.rto is not None else math.nan for r in reports]
    rto_ax.plot(positions, rto, marker="o", color="#2874a6", linewidth=1.4, label="RTO")
    rto_ax.step(
        positions,
        [r.targets.rto_s for r in reports],
        where="mid",
        color=_INK,
        linestyle="--",
        linewidth=1,
        label="RTO target",
    )
    rto_ax.set_ylabel("RTO (s)", fontsize=8)
    rto_ax.set_ylim(bottom=0)
    colours = [_GOOD if r.verdict in GOOD_VERDICTS else _LOSS for r in reports]
    rpo_ax.bar(positions, [r.rpo_records for r in reports], color=colours, width=0.6)
    rpo_ax.set_ylabel("RPO (records)", fontsize=8)
    # Never a negative axis, and an all-zero RPO on a 0..1 scale of whole records (matplotlib
    # would centre zero bars on -0.04..0.04).
    rpo_ax.set_ylim(0, records_axis_top([r.rpo_records for r in reports]))
    rpo_ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    labels = [_mpl_text(r.started_at[:16].replace("T", " ")) for r in reports]
    rpo_ax.set_xticks(
        positions, labels, rotation=30 if count > 5 else 0, ha="right" if count > 5 else "center"
    )
    rpo_ax.set_xlim(-0.6, count - 0.4)
    for ax in (rto_ax, rpo_ax):
        _style(ax)
    handles, labels = rto_ax.get_legend_handles_labels()
    handles += [Patch(color=_GOOD), Patch(color=_LOSS)]
    labels += ["RPO, verdict met / ready", "RPO, verdict breached / not ready"]
    figure.legend(handles, labels, loc="outside upper center", ncols=4, fontsize=8, frameon=False)
    return _svg(figure, "plot-trend")


# --- pages ----------------------------------------------------------------------------------

_templates = Environment(
    loader=PackageLoader("drkit", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_templates.filters["secs"] = format_seconds
_templates.filters["count"] = format_count
_templates.filters["size"] = format_bytes
_templates.filters["plain"] = format_plain


@dataclass(frozen=True)
class _Step:
    name: str
    seconds: str


def _number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (bools included)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _failover_view(run: dict[str, Any] | None) -> dict[str, Any] | None:
    """``failover_run`` for the template: its scalar fields (id, procedure, state first) and its
    steps (name, seconds); tolerant of missing keys."""
    if run is None:
        return None
    first = ["id", "procedure", "state"]
    tables = ["steps", "translations", "rpo_estimate"]  # shown as tables, not as fields
    keys = [k for k in first if k in run] + sorted(k for k in run if k not in [*first, *tables])
    steps: list[_Step] = []
    total = 0.0
    for raw in run.get("steps") or ():
        step: dict[str, Any] = raw if isinstance(raw, dict) else {"name": str(raw)}
        seconds = _number(step.get("seconds"))
        if seconds is not None:
            total += seconds
        steps.append(_Step(str(step.get("name", "?")), format_seconds(seconds)))
    return {
        "fields": [(key, format_plain(run[key])) for key in keys],
        "translations": [t for t in run.get("translations") or () if isinstance(t, dict)],
        "steps": steps,
        "total": format_seconds(total) if steps else "-",
    }


def _accounting_view(accounting: Mapping[str, Any] | None) -> dict[str, Any]:
    """drkit verify's summary for the page: its totals and per-group rows as tables (not raw
    JSON), how it ran and how long it took."""
    if not accounting:
        return {}
    totals = accounting.get("totals") or {}
    elapsed = accounting.get("elapsed_s")
    return {
        "totals": sorted((k.replace("_", " "), format_count(v)) for k, v in totals.items()),
        "groups": list(accounting.get("groups") or []),
        "method": accounting.get("method"),
        "records": format_count(totals.get("records", 0)),
        "elapsed": format_seconds(float(elapsed)) if elapsed is not None else "",
    }


def render_report(report: DrillReport) -> str:
    """One drill as a self-contained HTML document (inline CSS and SVG, no script, no URL).

    Top to bottom: title, the one-sentence summary (``#summary``), identity, the verdict banner
    (``#verdict``, its text exactly ``report.verdict.value``, green for PolicyMet/Ready, red
    otherwise) with the reasons, the RTO (``#rto``: total, parts table, ``#plot-rto``; "no move
    was made" when ``rto`` is None), the policy targets beside the measured values
    (``#policy``), the RPO (``#rpo``: totals, per-partition table, ``#plot-rpo``; "nothing
    lost" when no record was lost), consumer groups (``#groups``), checks (``#checks``), lag and
    throughput (``#plot-series``), the event timeline (``#plot-timeline`` and ``#events``), the
    failover run, accounting and notes.
    Deterministic: the same report gives the same text.
    """
    events = sorted(report.timeline, key=lambda event: event.at_s)
    plots = {
        "rto": _rto_plot(report),
        "rpo": _rpo_plot(report),
        "series": _series_plot(report),
        "timeline": _timeline_plot(report),
    }
    rto_parts: list[tuple[str, float, float]] = []
    if report.rto is not None:
        total = report.rto.total_s
        for label, attribute, _colour in RTO_PARTS:
            value = float(getattr(report.rto, attribute))
            rto_parts.append((label, value, 100 * value / total if total else 0.0))
    accounting = _accounting_view(report.accounting)
    return _templates.get_template("drill-report.html.j2").render(
        r=report,
        summary=summary(report),
        good=report.verdict in GOOD_VERDICTS,
        rto_parts=rto_parts,
        plots=plots,
        events=[(e, wall_clock(report, e.at_s)) for e in events],
        objectives=objectives(
            report.targets, report.rto, report.rpo, sum(g.reread for g in report.groups)
        ),
        fault=fault_facts(report),
        conditions=report.conditions,
        light_load=LIGHT_LOAD,
        failover=_failover_view(report.failover_run),
        accounting=accounting,
    )


def render_trend(reports: Sequence[DrillReport]) -> str:
    """Several drills as one self-contained HTML page: a table (id, scenario, started, verdict,
    RTO total, RPO records) and ``#plot-trend`` (RTO total and RPO records per drill), both in
    time order (by ``started_at``).  An empty sequence gives the page saying "no drills"."""
    ordered = sorted(reports, key=_started_key)
    return _templates.get_template("drill-trend.html.j2").render(
        reports=ordered,
        good=GOOD_VERDICTS,
        plot=_trend_plot(ordered),
    )


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def write_report(report: DrillReport, directory: Path) -> tuple[Path, Path]:
    """Write ``directory/report.html`` (``render_report``) and ``directory/report.json`` (the
    ``drkit.drill/v1`` document, indented, keys sorted); returns ``(html_path, json_path)``.

    Creates ``directory`` if missing.  Each file is written to ``<name>.tmp`` beside it and then
    renamed over the final name, so a reader sees the old file or the whole new one.  The JSON
    is written first: when the HTML exists, so does the document it was rendered from.
    """
    directory.mkdir(parents=True, exist_ok=True)
    html_path = directory / "report.html"
    json_path = directory / "report.json"
    document = json.dumps(report_document(report), indent=2, sort_keys=True) + "\n"
    page = render_report(report)
    _write_atomically(json_path, document)
    _write_atomically(html_path, page)
    return html_path, json_path
