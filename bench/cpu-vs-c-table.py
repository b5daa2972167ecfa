#!/usr/bin/env python3
"""cpu-vs-c-table.py - the tables of bench/results/cpu/engine-vs-c.md from
the lines bench/cpu-vs-c.sh prints.

Usage: bench/cpu-vs-c-table.py LOG IDLE_BEFORE_KB IDLE_AFTER_KB IDLE_C_KB

Prints, per case and thread count, the median wall time of before, after and
the C baseline with their ratios; for wordcount, the median maximum resident
memory and the memory per distinct key: (max RSS - the 256 MiB input - the
program's own RSS on a one-line input, IDLE_*) / the output's lines; and
whether every run of a case printed the same bytes (MD5).
"""
import collections
import statistics
import sys

INPUT_KB = 256 * 1024
ENGINES = ('before', 'after', 'C')


def main():
    log = sys.argv[1]
    idle = dict(zip(ENGINES, (float(x) for x in sys.argv[2:5])))
    runs = collections.defaultdict(list)
    digests = collections.defaultdict(set)
    lines = {}
    cases = []
    with open(log) as f:
        for row in f:
            w = row.split()
            if len(w) < 7 or w[3] == 'FAILED':
                continue
            case, threads, engine = w[0], int(w[1]), w[2]
            runs[(case, threads, engine)].append((float(w[3]), int(w[4])))
            digests[case].add(w[5])
            lines[case] = int(w[6])
            if (case, threads) not in cases:
                cases.append((case, threads))
    print('| case | threads | before s | after s | C s | before / C | after / C '
          '| after / before | runs |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    for case, t in cases:
        m = {e: statistics.median(s for s, _ in runs[(case, t, e)]) for e in ENGINES}
        n = min(len(runs[(case, t, e)]) for e in ENGINES)
        print(f"| {case} | {t} | {m['before']:.2f} | {m['after']:.2f} | {m['C']:.2f} "
              f"| {m['before'] / m['C']:.2f} | {m['after'] / m['C']:.2f} "
              f"| {m['after'] / m['before']:.2f} | {n} |")
    print()
    print('| case | threads | distinct keys | before max RSS MiB | after | C '
          '| before B/key | after B/key | C B/key |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    for case, t in cases:
        if not case.startswith('wordcount'):
            continue
        rss = {e: statistics.median(k for _, k in runs[(case, t, e)]) for e in ENGINES}
        per = {e: (rss[e] - INPUT_KB - idle[e]) * 1024 / lines[case] for e in ENGINES}
        print(f"| {case} | {t} | {lines[case]:,} | {rss['before'] / 1024:.0f} "
              f"| {rss['after'] / 1024:.0f} | {rss['C'] / 1024:.0f} | {per['before']:.0f} "
              f"| {per['after']:.0f} | {per['C']:.0f} |")
    print()
    for case, d in digests.items():
        print(f"{case}: {'every run the same output' if len(d) == 1 else 'OUTPUTS DIFFER'} "
              f"({' '.join(sorted(d))})")


main()
