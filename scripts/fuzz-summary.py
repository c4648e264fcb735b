#!/usr/bin/env python3
"""Summarises libFuzzer logs (fuzz/logs/<target>.log) as a markdown table:
executions, duration, the fuzzer's CPU time (`stat::cpu_seconds`, written by
scripts/fuzz.sh; "—" in older logs), final coverage, the edges found in the
last ten minutes and when coverage last grew (the plateau). Time of a line =
its execution count / its average exec/s."""
import re
import sys

LINE = re.compile(r"^#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+).*?exec/s: (\d+) rss: (\d+)Mb")
CPU = re.compile(r"^stat::cpu_seconds: (\d+)")

print("| target | runs | time | CPU time | exec/s | cov (edges) | ft (features) | corpus | new edges in the last 10 min | cov last grew at | peak RSS |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    target = path.rsplit("/", 1)[-1].removesuffix(".log")
    last = None
    cov_grew = 0.0
    prev_cov = -1
    peak = 0
    history = []  # (time, cov)
    cpu = None
    for line in open(path, errors="replace"):
        if m := CPU.match(line):
            cpu = int(m.group(1))
        m = LINE.match(line)
        if not m:
            continue
        runs, _, cov, ft, corp, size, eps, rss = m.groups()
        runs, cov, ft, eps, rss = int(runs), int(cov), int(ft), max(int(eps), 1), int(rss)
        t = runs / eps
        if cov > prev_cov:
            cov_grew, prev_cov = t, cov
        peak = max(peak, rss)
        history.append((t, cov))
        last = (runs, t, eps, cov, ft, corp, size)
    if last is None:
        continue
    runs, t, eps, cov, ft, corp, size = last
    before = max((c for (when, c) in history if when <= t - 600), default=0)
    gain = f"+{cov - before} ({(cov - before) / cov:.1%})" if before else "—"
    mins = lambda s: f"{s / 60:.0f} min"
    cpu_time = "—" if cpu is None else f"{cpu / 60:.1f} min"
    print(f"| {target} | {runs:,} | {mins(t)} | {cpu_time} | {eps:,} | {cov:,} | {ft:,} | {corp} ({size}) | {gain} | {mins(cov_grew)} | {peak} MB |")
