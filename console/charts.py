"""Charts for the console, drawn server-side as inline SVG: time buckets, percentiles and the
line and bar charts themselves. Pure functions (no database, no clock): the charts view reads
the numbers and passes them in. Every piece of text put into the SVG is escaped here."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from functools import partial

from django.utils.html import escape

# range key -> (span, bucket size): about two dozen buckets each, on round boundaries.
RANGES: dict[str, tuple[timedelta, timedelta]] = {
    "1h": (timedelta(hours=1), timedelta(minutes=2, seconds=30)),
    "24h": (timedelta(hours=24), timedelta(hours=1)),
    "7d": (timedelta(days=7), timedelta(hours=6)),
}
DEFAULT_RANGE = "24h"
PERCENTILES = (50, 95, 99)
# Series colours, chosen to stay apart for common colour blindness (Okabe-Ito).
PALETTE = ("#0072B2", "#E69F00", "#D55E00", "#009E73", "#CC79A7", "#56B4E9")


# --- time buckets ------------------------------------------------------------------------


@dataclass(frozen=True)
class Buckets:
    """`count` consecutive buckets of `size` from `start`; the last one holds `now`."""

    start: datetime
    size: timedelta
    count: int

    @property
    def end(self) -> datetime:
        return self.start + self.size * self.count

    def edges(self) -> list[datetime]:
        """count + 1 boundaries: bucket i is [edges[i], edges[i + 1])."""
        return [self.start + self.size * i for i in range(self.count + 1)]

    def index(self, moment: datetime) -> int | None:
        if not self.start <= moment < self.end:
            return None
        return int((moment - self.start) / self.size)

    def labels(self, tz: tzinfo = UTC) -> list[str]:
        """The start of each bucket in `tz`, as short as the bucket size allows."""
        fmt = "%a %H:%M" if self.size >= timedelta(hours=6) else "%H:%M"
        return [edge.astimezone(tz).strftime(fmt) for edge in self.edges()[:-1]]


def buckets_for(range_key: str, now: datetime) -> Buckets:
    """The buckets of a range ending with the bucket that holds `now`, aligned to multiples of
    the bucket size since the Unix epoch (in UTC, where every hour is as long as the next), so
    a reload shows the same boundaries."""
    span, size = RANGES[range_key]
    count = int(span / size)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    current = epoch + size * ((now.astimezone(UTC) - epoch) // size)  # the bucket holding now
    return Buckets(start=current - size * (count - 1), size=size, count=count)


# --- statistics --------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between the closest ranks (the
    usual definition, numpy's default); None for no values."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not between 0 and 100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def error_rate(errors: int, finished: int) -> float | None:
    """Errors as a percentage of finished tasks; None when nothing finished."""
    return None if finished == 0 else 100.0 * errors / finished


@dataclass(frozen=True)
class AgentSeries:
    """An agent's chart series, one value per bucket (None: nothing to measure there)."""

    created: list[int]
    finished: list[int]
    errors: list[int]
    latency: dict[int, list[float | None]]  # percentile -> seconds per bucket
    error_rate: list[float | None]  # percent per bucket
    sampled: list[bool]  # the bucket's latencies come from a sample of its tasks


def agent_series(
    *,
    created: Sequence[int],
    finished: Sequence[int],
    errors: Sequence[int],
    durations: Sequence[Sequence[float]],
) -> AgentSeries:
    """Per bucket: tasks created, finished (terminal), failed or rejected, the latency
    percentiles of the finished tasks' durations (seconds) and the error rate."""
    count = len(created)
    if not len(finished) == len(errors) == len(durations) == count:
        raise ValueError("every series needs one value per bucket")
    return AgentSeries(
        created=list(created),
        finished=list(finished),
        errors=list(errors),
        latency={q: [percentile(d, q) for d in durations] for q in PERCENTILES},
        error_rate=[error_rate(e, f) for e, f in zip(errors, finished, strict=True)],
        sampled=[len(d) < f for d, f in zip(durations, finished, strict=True)],
    )


# --- formatting --------------------------------------------------------------------------


def format_seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.2f} s"
    if value < 3600:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def format_percent(value: float) -> str:
    return f"{value:.1f}%"


def format_count(value: float) -> str:
    return f"{value:,.0f}"


# The units of a duration axis, largest first: (name on the axis, seconds in one).
DURATION_UNITS = (("hours", 3600.0), ("minutes", 60.0), ("seconds", 1.0), ("milliseconds", 0.001))


def duration_unit(top: float) -> tuple[str, float]:
    """The unit an axis of durations up to `top` seconds is written in: the largest in which
    `top` is at least one (as format_seconds names a single value), seconds for no data."""
    if top <= 0:
        return "seconds", 1.0
    return next((u for u in DURATION_UNITS if top >= u[1]), DURATION_UNITS[-1])


def nice_ticks(top: float, target: int = 4, *, whole: bool = False) -> list[float]:
    """0 and a few round values (1, 2, 2.5 or 5 times a power of ten) up to at least `top`;
    `whole` keeps every step a whole number (counts)."""
    if top <= 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / target
    power = 10 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if whole else (1, 2, 2.5, 5, 10)
    step = next(m * power for m in steps if m * power >= raw)
    if whole:
        step = max(step, 1)
    ticks = [0.0]
    while ticks[-1] < top * (1 - 1e-9):
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


# --- SVG ---------------------------------------------------------------------------------

# The title has the first line to itself and the legend the second, so a long title never
# runs under the legend.
WIDTH, HEIGHT = 580, 244
LEFT, RIGHT, TOP, BOTTOM = 64, 14, 48, 46
LEGEND_Y = 24
# Characters of the title that fit on its line (12 px bold, wide letters). A longer title is cut
# in the middle of its subject (a title reads "<subject>: <what>", and the what tells the charts
# apart), and the whole one is the chart's <title> (its tooltip).
TITLE_CHARS = 70


def _cut(text: str, chars: int) -> str:
    """`text` in at most `chars` characters, its middle replaced by an ellipsis if need be."""
    if len(text) <= chars:
        return text
    head = (chars - 1) // 2
    return text[:head] + "…" + text[len(text) - (chars - 1 - head) :]


def _fit(title: str, chars: int) -> str:
    subject, sep, what = title.partition(": ")
    room = chars - len(sep) - len(what)
    if len(title) <= chars or not sep or room < 12:
        return _cut(title, chars)
    return _cut(subject, room) + sep + what


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]


def _num(value: float) -> str:
    return f"{value:.1f}"


def _frame(
    *,
    title: str,
    x_labels: Sequence[str],
    ticks: list[float],
    y_label: str,
    fmt: Callable[[float], str],
    legend: Sequence[str],
) -> list[str]:
    """The chart's box: title, horizontal grid with y tick labels (`fmt`), x labels, legend."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top_tick = ticks[-1]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img">',
        f"<title>{escape(title)}</title>",
        f'<text class="chart-title" x="{LEFT}" y="16">{escape(_fit(title, TITLE_CHARS))}</text>',
    ]
    for tick in ticks:
        y = TOP + plot_h - plot_h * tick / top_tick
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{_num(y)}" y2="{_num(y)}"/>'
            f'<text class="tick" x="{LEFT - 6}" y="{_num(y + 4)}" text-anchor="end">'
            f"{escape(fmt(tick) if tick else '0')}</text>"
        )
    parts.append(
        f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}"/>'
        f'<line class="axis" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" '
        f'y2="{TOP + plot_h}"/>'
    )
    count = len(x_labels)
    every = max(1, math.ceil(count / 6))  # about six labels fit under the axis
    for i, label in enumerate(x_labels):
        if i % every:
            continue
        x = LEFT + plot_w * (i + 0.5) / count
        parts.append(
            f'<text class="tick" x="{_num(x)}" y="{TOP + plot_h + 16}" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    parts.append(
        f'<text class="axis-label" x="14" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    x = WIDTH - RIGHT
    for index in reversed(range(len(legend))):  # right-aligned, in series order
        name = legend[index]
        width = 22 + 7 * len(name)
        x -= width
        parts.append(
            f'<g class="legend"><rect x="{x}" y="{LEGEND_Y}" width="10" height="10" '
            f'fill="{PALETTE[index % len(PALETTE)]}"/>'
            f'<text x="{x + 14}" y="{LEGEND_Y + 9}">{escape(name)}</text></g>'
        )
    return parts


def line_chart(
    *,
    title: str,
    x_labels: Sequence[str],
    series: Sequence[Series],
    y_label: str,
    fmt: Callable[[float], str] = format_count,
    y_unit: float | None = None,
) -> str:
    """Lines over buckets, one per series, broken where a bucket has no value (None). Each
    point carries its value as a tooltip (<title>, by `fmt`) and a data-value attribute.

    The y ticks are written by `fmt`; with `y_unit` (how many of the values' units one axis
    unit is) they are round numbers of that unit, written bare, and `y_label` names it."""
    if any(len(s.values) != len(x_labels) for s in series):
        raise ValueError("every series needs one value per x label")
    present = [v for s in series for v in s.values if v is not None]
    top = max(present, default=0.0)
    if y_unit is None:
        # Counts are whole: no tick between 0 and 1 (written "0" by format_count).
        ticks, tick_fmt = nice_ticks(top, whole=fmt is format_count), fmt
    else:
        ticks = [t * y_unit for t in nice_ticks(top / y_unit)]
        tick_fmt = partial(_in_unit, unit=y_unit)
    parts = _frame(
        title=title,
        x_labels=x_labels,
        ticks=ticks,
        y_label=y_label,
        fmt=tick_fmt,
        legend=[s.name for s in series],
    )
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    count = max(len(x_labels), 1)

    def point(i: int, value: float) -> tuple[float, float]:
        return LEFT + plot_w * (i + 0.5) / count, TOP + plot_h - plot_h * value / ticks[-1]

    for index, s in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        runs: list[list[tuple[float, float]]] = [[]]
        dots = []
        for i, value in enumerate(s.values):
            if value is None:
                runs.append([])
                continue
            x, y = point(i, value)
            runs[-1].append((x, y))
            tip = f"{x_labels[i]} {s.name}: {fmt(value)}"
            dots.append(
                f'<circle cx="{_num(x)}" cy="{_num(y)}" r="2.5" fill="{colour}" '
                f'data-series="{escape(s.name)}" data-bucket="{i}" data-value="{value:.6g}">'
                f"<title>{escape(tip)}</title></circle>"
            )
        for run in runs:
            if len(run) > 1:
                points = " ".join(f"{_num(x)},{_num(y)}" for x, y in run)
                parts.append(
                    f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" '
                    f'points="{points}"/>'
                )
        parts.extend(dots)
    if not present:
        parts.append(_no_data())
    parts.append("</svg>")
    return "".join(parts)


def latency_chart(*, title: str, x_labels: Sequence[str], series: Sequence[Series]) -> str:
    """A line chart of durations in seconds: its axis in the one unit that suits the longest
    (milliseconds to hours), named under the axis; each point's tooltip says its own value with
    its unit."""
    present = [v for s in series for v in s.values if v is not None]
    name, size = duration_unit(max(present, default=0.0))
    return line_chart(
        title=title,
        x_labels=x_labels,
        series=series,
        y_label=name,
        fmt=format_seconds,
        y_unit=size,
    )


def bar_chart(
    *,
    title: str,
    x_labels: Sequence[str],
    values: Sequence[float],
    y_label: str,
    name: str,
    fmt: Callable[[float], str] = format_count,
) -> str:
    """One bar per bucket, its value as a tooltip (<title>) and a data-value attribute."""
    if len(values) != len(x_labels):
        raise ValueError("one value per x label")
    ticks = nice_ticks(max(values, default=0), whole=fmt is format_count)
    parts = _frame(
        title=title, x_labels=x_labels, ticks=ticks, y_label=y_label, fmt=fmt, legend=[name]
    )
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(values), 1)
    for i, value in enumerate(values):
        height = plot_h * value / ticks[-1]
        tip = f"{x_labels[i]} {name}: {fmt(value)}"
        parts.append(
            f'<rect x="{_num(LEFT + slot * i + slot * 0.15)}" y="{_num(TOP + plot_h - height)}" '
            f'width="{_num(slot * 0.7)}" height="{_num(height)}" fill="{PALETTE[0]}" '
            f'data-series="{escape(name)}" data-bucket="{i}" data-value="{value:.6g}">'
            f"<title>{escape(tip)}</title></rect>"
        )
    if not any(values):
        parts.append(_no_data())
    parts.append("</svg>")
    return "".join(parts)


def _in_unit(value: float, *, unit: float) -> str:
    return f"{value / unit:.6g}"


def _no_data() -> str:
    return (
        f'<text class="no-data" x="{LEFT + (WIDTH - LEFT - RIGHT) / 2:.1f}" '
        f'y="{TOP + (HEIGHT - TOP - BOTTOM) / 2:.1f}" text-anchor="middle">no data</text>'
    )
