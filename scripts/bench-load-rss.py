#!/usr/bin/env python3
"""Peak memory of `omnigraph-host load` against the size of the file it loads.

The CLI streams a file (memory is one batch), so loading a file 8x larger must
not need 8x the memory. Writes two files of fat Person records (about 4 KiB a
line), loads each into a fresh local graph and reads the process's peak RSS
from wait4. Usage: scripts/bench-load-rss.py [small_mib] [large_mib]
(default 32 and 256). Ends with one `target` line (docs/performance.md).
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/omnigraph-ingest/target"))
HOST = os.path.join(TARGET, "debug", "omnigraph-host")
GOAL = 1.5  # peak RSS ratio large ÷ small; 8x the data


def write_file(path, mib):
    tags = ["t%03d-%s" % (i, "x" * 24) for i in range(128)]
    written, n = 0, 0
    with open(path, "w") as f:
        while written < mib * 1024 * 1024:
            line = json.dumps({"type": "Person", "data": {"name": "p%08d" % n, "age": n % 100, "tags": tags}}) + "\n"
            f.write(line)
            written += len(line)
            n += 1
    return n


def peak_rss_mib(args):
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("load failed: %s\n%s" % (" ".join(args), err[-2000:]))
    return usage.ru_maxrss / 1024


def main():
    small, large = (int(a) for a in (sys.argv[1:3] if len(sys.argv) > 2 else ("32", "256")))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mib in (small, large):
            data = os.path.join(tmp, "people-%d.ndjson" % mib)
            lines = write_file(data, mib)
            graph = os.path.join(tmp, "g-%d" % mib)
            subprocess.run([HOST, "init", "--root", graph, os.path.join(ROOT, "samples/people.pg")], check=True, capture_output=True)
            rss = peak_rss_mib([HOST, "load", "--root", graph, data])
            results[mib] = rss
            print("load of %d MiB (%d lines): peak RSS %.0f MiB" % (mib, lines, rss))
    ratio = results[large] / results[small]
    print("command: scripts/bench-load-rss.py %d %d" % (small, large))
    print("target load_peak_rss_%d_vs_%d %.2f %.1f %s" % (large, small, ratio, GOAL, "met" if ratio <= GOAL else "not met"))


if __name__ == "__main__":
    main()
