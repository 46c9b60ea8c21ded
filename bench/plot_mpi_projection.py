#!/usr/bin/env python3
"""Trials per second against hosts, one line per batch size, from the JSON
lines bench/mpi_projection prints, as an SVG (log-log, no plotting library
needed), with rank 0's share of the time marked at each point and the
linear ideal from the first point dashed.

usage: bench/plot_mpi_projection.py PROJECTION.jsonl -o OUT.svg
"""
import argparse
import json
import math

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 400, 70, 170, 30, 50


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("projection")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    # Series are printed one after another; a series starts again at 1 host.
    series, current = [], None
    for text in open(a.projection):
        text = text.strip()
        if not text.startswith("{"):
            continue
        p = json.loads(text)
        if current is None or p["hosts"] <= current[-1][0]:
            current = []
            series.append(current)
        current.append((p["hosts"], p["trials_per_s"], p["rank0_share"], p["batch_size"]))
    xs = [pt[0] for s in series for pt in s]
    ys = [pt[1] for s in series for pt in s]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y_ideal = [s[0][1] * pt[0] / s[0][0] for s in series for pt in s]
    y0 = math.floor(math.log10(min(ys)))
    y1 = math.ceil(math.log10(max(ys + y_ideal)))
    px = lambda x: LEFT + (math.log10(x) - x0) / max(x1 - x0, 1e-9) * (W - LEFT - RIGHT)
    py = lambda y: H - BOTTOM - (math.log10(y) - y0) / max(y1 - y0, 1e-9) * (H - TOP - BOTTOM)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    for e in range(int(x0), int(x1) + 1):
        x = px(10 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{10 ** e}</text>')
    for e in range(y0, y1 + 1):
        y = py(10 ** e)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">hosts '
               f'(8 cores: 1 runner, 7 build workers each)</text>')
    out.append(f'<text x="16" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {(TOP + H - BOTTOM) / 2})">trials per second</text>')
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        sizes = sorted({pt[3] for pt in s})
        name = ("batch %d" % sizes[0]) if len(sizes) == 1 else (
            "batch %d..%d (auto)" % (sizes[0], sizes[-1]))
        pts = " ".join(f"{px(h):.1f},{py(r):.1f}" for h, r, _, _ in s)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        ideal = " ".join(f"{px(h):.1f},{py(s[0][1] * h / s[0][0]):.1f}" for h, _, _, _ in s)
        out.append(f'<polyline points="{ideal}" fill="none" stroke="{color}" '
                   f'stroke-dasharray="4 4" opacity="0.5"/>')
        for h, r, share, _ in s:
            out.append(f'<circle cx="{px(h):.1f}" cy="{py(r):.1f}" r="3" fill="{color}"/>')
            out.append(f'<text x="{px(h) + 5:.1f}" y="{py(r) - 6:.1f}" fill="{color}" '
                       f'font-size="10">{100 * share:.0f}%</text>')
        ly = TOP + 20 * i
        out.append(f'<line x1="{W - RIGHT + 12}" y1="{ly}" x2="{W - RIGHT + 36}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{W - RIGHT + 40}" y="{ly + 4}">{name}</text>')
    ly = TOP + 20 * len(series) + 10
    out.append(f'<text x="{W - RIGHT + 12}" y="{ly}" font-size="10">dashed: linear</text>')
    out.append(f'<text x="{W - RIGHT + 12}" y="{ly + 14}" font-size="10">n%: rank 0\'s share'
               f'</text>')
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
