#!/usr/bin/env python3
"""Best GFLOP/s so far against trials and against seconds, one line per log,
as an SVG with two panels (no plotting library needed).

usage: bench/plot_sample_efficiency.py --flops F -o OUT.svg NAME=LOG [NAME=LOG ...]

A log is a tensortune record log (one saved measure.Record graph per line);
F is the workload's floating-point operations per call. Also prints, per
log, the best at 100, 200, 500 and 1000 trials and the trial at which each
log first reached the last log's final best.
"""
import argparse
import json
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def read_curve(path, flops):
    """[(trial, seconds since the first record, best GFLOP/s so far)]."""
    curve, best, start = [], 0.0, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            result = next((n for n in doc.get("nodes", []) if n.get("type") == "measure.MeasureResult"), None)
            if result is None:
                continue
            start = result["timestamp"] if start is None else start
            costs = result.get("costs") or []
            if result.get("error_code") == "NO_ERROR" and costs:
                best = max(best, flops / (sum(costs) / len(costs)) / 1e9)
            curve.append((len(curve) + 1, result["timestamp"] - start, best))
    return curve


def panel(x0, width, height, curves, key, label):
    xmax = max((c[-1][key] for _, c in curves if c), default=1) or 1
    ymax = max((c[-1][2] for _, c in curves if c), default=1) or 1
    ymax *= 1.1
    out = [f'<g transform="translate({x0},20)">',
           f'<rect x="50" y="0" width="{width}" height="{height}" fill="none" stroke="#888"/>']
    for k in range(6):
        y = height - height * k / 5
        out.append(f'<text x="45" y="{y + 4:.1f}" font-size="11" text-anchor="end">{ymax * k / 5:.0f}</text>')
        out.append(f'<line x1="50" x2="{50 + width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        x = 50 + width * k / 5
        out.append(f'<text x="{x:.1f}" y="{height + 15}" font-size="11" text-anchor="middle">{xmax * k / 5:.0f}</text>')
    out.append(f'<text x="{50 + width / 2}" y="{height + 32}" font-size="12" text-anchor="middle">{label}</text>')
    out.append(f'<text x="12" y="{height / 2}" font-size="12" transform="rotate(-90 12 {height / 2})" '
               f'text-anchor="middle">best GFLOP/s</text>')
    for i, (name, c) in enumerate(curves):
        points = " ".join(f"{50 + width * p[key] / xmax:.1f},{height - height * p[2] / ymax:.1f}" for p in c)
        out.append(f'<polyline fill="none" stroke="{COLORS[i % len(COLORS)]}" stroke-width="1.5" points="{points}"/>')
    out.append("</g>")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flops", type=float, required=True)
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("logs", nargs="+", help="NAME=LOG")
    args = parser.parse_args()
    curves = []
    for item in args.logs:
        if "=" not in item:
            sys.exit(f"error: '{item}' is not NAME=LOG")
        name, path = item.split("=", 1)
        curves.append((name, read_curve(path, args.flops)))
    width, height = 420, 260
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * width + 140}" height="{height + 100}" '
           'font-family="sans-serif">']
    svg += panel(0, width, height, curves, 0, "trials")
    svg += panel(width + 70, width, height, curves, 1, "seconds")
    for i, (name, _) in enumerate(curves):
        y = height + 70 + 0 * i
        x = 60 + 200 * i
        svg.append(f'<rect x="{x}" y="{y - 9}" width="12" height="4" fill="{COLORS[i % len(COLORS)]}"/>')
        svg.append(f'<text x="{x + 16}" y="{y - 3}" font-size="12">{name}</text>')
    svg.append("</svg>")
    with open(args.output, "w") as f:
        f.write("\n".join(svg) + "\n")
    target = curves[-1][1][-1][2] if curves[-1][1] else 0
    for name, c in curves:
        at = {n: next((p[2] for p in c if p[0] == n), None) for n in (100, 200, 500, 1000)}
        reach = next((p[0] for p in c if target > 0 and p[2] >= target), None)
        cols = "  ".join(f"@{n}: {v:.1f}" if v is not None else f"@{n}: -" for n, v in at.items())
        final = c[-1] if c else (0, 0, 0)
        print(f"{name:>16}: {len(c)} trials in {final[1]:.0f} s, best {final[2]:.1f} GFLOP/s  {cols}  "
              f"reaches {curves[-1][0]}'s final best at trial {reach if reach else '-'}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
