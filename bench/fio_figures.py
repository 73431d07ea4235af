#!/usr/bin/env python3
"""One figure from a fio JSON result (group_reporting: one job entry).
usage: fio_figures.py FILE read|write gbps|iops|p50_us|p99_us|max_ms"""
import json
import sys


def figure(path, rw, what):
    with open(path) as f:
        job = json.load(f)["jobs"][0][rw]
    if what == "gbps":
        return "%.3f" % (job["bw_bytes"] / 1e9)
    if what == "iops":
        return "%.0f" % job["iops"]
    if what == "max_ms":  # the longest any request waited
        return "%.1f" % (job["clat_ns"]["max"] / 1e6)
    pct = {"p50_us": "50.000000", "p99_us": "99.000000"}[what]
    return "%.1f" % (job["clat_ns"]["percentile"][pct] / 1e3)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    print(figure(*sys.argv[1:]))
