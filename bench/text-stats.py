#!/usr/bin/env python3
"""Word and line lengths of text files: the figures docs/datagen.md gives.

Usage: text-stats.py FILE...   (- reads standard input)

A word is a maximal run of bytes other than space, tab, newline and carriage
return; a line is the bytes before a newline (blank lines count, with 0).
Prints the mean, median, 99th percentile and longest of each, and the share
of words longer than 12 bytes (the longest key the GPU hash variant's
per-block cache holds).
"""
import re
import sys


def percentile(counts, q):
    """The least length whose cumulative share reaches q, from a histogram."""
    total = sum(counts.values())
    seen = 0
    for length in sorted(counts):
        seen += counts[length]
        if seen >= q * total:
            return length
    return 0


def summary(name, counts):
    total = sum(counts.values())
    mean = sum(k * v for k, v in counts.items()) / total
    return (f"{name}: {total} mean {mean:.2f} median {percentile(counts, 0.5)} "
            f"p99 {percentile(counts, 0.99)} longest {max(counts)}")


def main(paths):
    words, lines = {}, {}
    word = re.compile(rb"[^ \t\r\n]+")
    for path in paths:
        f = sys.stdin.buffer if path == "-" else open(path, "rb")
        for line in f:
            body = line[:-1] if line.endswith(b"\n") else line
            lines[len(body)] = lines.get(len(body), 0) + 1
            for w in word.findall(body):
                words[len(w)] = words.get(len(w), 0) + 1
        if f is not sys.stdin.buffer:
            f.close()
    if not words:
        sys.exit("text-stats.py: no words in the input")
    over = sum(v for k, v in words.items() if k > 12) / sum(words.values())
    print(summary("words", words) + f" over-12 {100 * over:.1f}%")
    print(summary("lines", lines))


if __name__ == "__main__":
    main(sys.argv[1:] or ["-"])
