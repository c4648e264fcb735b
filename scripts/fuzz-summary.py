#!/usr/bin/env python3
"""Summarises libFuzzer logs (fuzz/logs/<target>.log) as a markdown table:
executions, duration, final coverage, and when coverage last grew (the
plateau). Time of a line = its execution count / its average exec/s."""
import re
import sys

LINE = re.compile(r"^#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+).*?exec/s: (\d+) rss: (\d+)Mb")

print("| target | runs | time | exec/s | cov (edges) | ft (features) | corpus | cov last grew at | ft last grew at | peak RSS |")
print("|---|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    target = path.rsplit("/", 1)[-1].removesuffix(".log")
    last = None
    cov_grew = ft_grew = 0.0
    prev_cov = prev_ft = -1
    peak = 0
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if not m:
            continue
        runs, _, cov, ft, corp, size, eps, rss = m.groups()
        runs, cov, ft, eps, rss = int(runs), int(cov), int(ft), max(int(eps), 1), int(rss)
        t = runs / eps
        if cov > prev_cov:
            cov_grew, prev_cov = t, cov
        if ft > prev_ft:
            ft_grew, prev_ft = t, ft
        peak = max(peak, rss)
        last = (runs, t, eps, cov, ft, corp, size)
    if last is None:
        continue
    runs, t, eps, cov, ft, corp, size = last
    mins = lambda s: f"{s / 60:.0f} min"
    print(f"| {target} | {runs:,} | {mins(t)} | {eps:,} | {cov:,} | {ft:,} | {corp} ({size}) | {mins(cov_grew)} | {mins(ft_grew)} | {peak} MB |")
