"""The overview's rate chart as an SVG document drawn on the server (pure: numbers in, text
out). No chart library and no script: the browser shows it as an image, and the page's
Content-Security-Policy stays ``script-src 'self'`` with nothing inline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final
from xml.sax.saxutils import escape, quoteattr

__all__ = ["ChartWords", "rate_chart"]

_COLOURS: Final = ("#2f6fdf", "#d9622b", "#2e9e5b", "#8a4fd1")


@dataclass(frozen=True, slots=True)
class ChartWords:
    """The chart's words in the page's language: each series' name (by its key; a key not
    named is shown as it is), the unit of a rate, the left edge's ``-60 min`` (``%(minutes)s``
    the span) and the right edge."""

    names: Mapping[str, str] = field(default_factory=dict)
    per_second: str = "/s"
    ago: str = "-%(minutes)s min"
    now: str = "now"


def _nice_top(value: float) -> float:
    """The smallest of 1, 2, 5 × 10ⁿ at or above ``value`` (at least 1)."""
    top = 1.0
    while top < value:
        for factor in (2.0, 2.5, 2.0):
            top *= factor
            if top >= value:
                break
    return top


def rate_chart(series: Mapping[str, Sequence[float]], step: float, span: float,
               width: int = 760, height: int = 220, words: ChartWords = ChartWords()) -> str:
    """Lines of per-second rates (one point per ``step`` seconds, the newest at the right
    edge, ``span`` seconds across), with the axis top and a legend."""
    left, right, top_pad, bottom = 48, 10, 24, 22
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    peak = max((max(values) for values in series.values() if values), default=0.0)
    top = _nice_top(peak)
    points_across = max(1.0, span / step)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect x="{left}" y="{top_pad}" width="{plot_w}" height="{plot_h}" fill="#fbfbfd" '
        'stroke="#ccd"/>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = top_pad + plot_h * (1 - fraction)
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
                     'stroke="#e3e3ea"/>')
        parts.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" '
                     f'fill="#555">{top * fraction:g}{escape(words.per_second)}</text>')
    ago = words.ago % {"minutes": f"{span / 60:g}"}
    parts.append(f'<text x="{left}" y="{height - 6}" fill="#555">{escape(ago)}</text>')
    parts.append(f'<text x="{left + plot_w}" y="{height - 6}" text-anchor="end" '
                 f'fill="#555">{escape(words.now)}</text>')
    for index, (name, values) in enumerate(series.items()):
        colour = _COLOURS[index % len(_COLOURS)]
        count = len(values)
        coords = []
        for i, value in enumerate(values):
            x = left + plot_w - (count - 1 - i) * plot_w / points_across
            y = top_pad + plot_h * (1 - min(value, top) / top)
            coords.append(f"{x:.1f},{y:.1f}")
        if coords:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" '
                         f'points={quoteattr(" ".join(coords))}/>')
            cx, cy = coords[-1].split(",")  # the newest point, seen even while it is alone
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour}"/>')
        legend_x = left + 8 + index * 180
        parts.append(f'<rect x="{legend_x}" y="6" width="10" height="10" fill="{colour}"/>')
        latest = f" {values[-1]:.2f}{words.per_second}" if values else ""
        parts.append(f'<text x="{legend_x + 14}" y="15" fill="#333">'
                     f'{escape(words.names.get(name, name) + latest)}</text>')
    parts.append("</svg>")
    return "".join(parts)
