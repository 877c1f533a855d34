"""Line charts as inline SVG, drawn on the server: no JavaScript library, nothing fetched.

A chart is a few polylines (one per model) over a time axis, with its highest value, its time
span and a legend in text; every name is escaped. `role="img"` and an `aria-label` give screen
readers the title, and the page lists the same figures in a table beside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from markupsafe import Markup, escape

#: Distinguishable on white and for common colour blindness (Okabe-Ito).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
WIDTH, HEIGHT, PAD_LEFT, PAD_RIGHT, PAD_Y = 480, 150, 48, 8, 14


@dataclasses.dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    #: Series name -> (time, value) points, oldest first.
    series: Mapping[str, Sequence[tuple[float, float]]]


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.3g}"


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def svg(chart: Chart) -> Markup:
    """The chart as an <svg> element (an empty frame saying so when there is nothing yet)."""
    points = [p for series in chart.series.values() for p in series]
    label = escape(f"{chart.title} ({chart.unit})")
    head = Markup('<svg class="chart" viewBox="0 0 {w} {h}" role="img" aria-label="{label}" '
                  'xmlns="http://www.w3.org/2000/svg"><title>{label}</title>').format(
                      w=WIDTH, h=HEIGHT, label=label)
    frame = Markup('<rect x="{x}" y="{y}" width="{w}" height="{h}" class="frame"/>').format(
        x=PAD_LEFT, y=PAD_Y, w=WIDTH - PAD_LEFT - PAD_RIGHT, h=HEIGHT - 2 * PAD_Y)
    if not points:
        empty = Markup('<text x="{x}" y="{y}" class="empty">no data yet</text>').format(
            x=WIDTH // 2 - 30, y=HEIGHT // 2)
        return head + frame + empty + Markup("</svg>")
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    top = max(v for _, v in points) or 1.0
    span = max(t1 - t0, 1e-9)
    inner_w, inner_h = WIDTH - PAD_LEFT - PAD_RIGHT, HEIGHT - 2 * PAD_Y

    def xy(t: float, v: float) -> str:
        x = PAD_LEFT + (inner_w * (t - t0) / span if t1 > t0 else inner_w)
        y = PAD_Y + inner_h * (1 - v / top)
        return f"{x:.1f},{y:.1f}"

    lines = Markup()
    for index, (_name, series) in enumerate(sorted(chart.series.items())):
        if series:
            coords = " ".join(xy(t, v) for t, v in series)
            lines += Markup('<polyline points="{p}" fill="none" stroke="{c}" stroke-width="2"/>'
                            ).format(p=coords, c=color(index))
    axis = Markup('<text x="2" y="{y1}" class="axis">{top}</text><text x="2" y="{y0}" '
                  'class="axis">0</text><text x="{xr}" y="{yb}" class="axis" text-anchor="end">'
                  "last {span}s</text>").format(
                      y1=PAD_Y + 4, top=_fmt(top), y0=HEIGHT - PAD_Y, xr=WIDTH - PAD_RIGHT,
                      yb=HEIGHT - 2, span=round(t1 - t0))
    return head + frame + lines + axis + Markup("</svg>")
