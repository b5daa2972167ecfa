#!/usr/bin/env python3
"""stream_figures.py - the figures of inputs larger than the GPU's memory:
wordcount over a large text from the page cache, end to end, against the
measured pinned host-to-device bandwidth; the same input under a device
memory budget a quarter of its size against the run without one (both
mapped in chunks, each going up while the map reads the one before); the
GPU and the CPU engine together (--device both) against the GPU alone;
from --explain, how much of the copying the chunks hid; and the fixed
cost of a GPU run (soren-host over 1 MiB of the same text: the CUDA
driver's start, the context, pinning the staging memory, the exit), with
the large run's rate without it.

    stream_figures.py [--gib N] [--budget SIZE] [--runs N] [--data DIR] [--json FILE]

--gib     input size in GiB (default 8): soren-gen's 256 MiB of Zipf text,
          seed 8, repeated (generating 8 GiB afresh takes minutes)
--budget  the device memory budget of the chunked runs (default: a quarter
          of the input, so the input is 4x the budget)
--runs    timed runs of each configuration, after a warm-up (default 3)

Run from the GPU bundle (gpu-bundle/bench/stream_figures.py) or the build
tree (SOREN_BENCH_ROOT).  Every run's output is compared with the first's,
byte for byte.  Prints a Markdown table; --json writes every figure with
its command.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

from run_bench import files_equal, median  # beside this script, in the tree and the bundle

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("SOREN_BENCH_ROOT", os.path.dirname(HERE))


def tool(name):
    return os.path.join(ROOT, name)


def make_input(data, gib):
    """gib GiB of text: 256 MiB of soren-gen text, repeated."""
    os.makedirs(data, exist_ok=True)
    base = os.path.join(data, "text-256m")
    path = os.path.join(data, f"text-{gib}g")
    if not os.path.exists(base):
        subprocess.run([tool("soren-gen"), "text", "--size", "256M", "--seed", "8", "-o", base],
                       check=True)
    if not os.path.exists(path) or os.path.getsize(path) != gib << 30:
        with open(path + ".tmp", "wb") as out, open(base, "rb") as f:
            piece = f.read()
            for _ in range(gib * 4):
                out.write(piece)
        os.replace(path + ".tmp", path)
    # into the page cache: the runs read it from memory, as the figure says
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass
    return path


def run_once(cmd):
    """Wall milliseconds of one soren-host run, and its --explain report."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = (time.perf_counter() - t0) * 1e3
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)}: exit {p.returncode}: {p.stderr[-2000:]}")
    report = None
    for line in p.stderr.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
    return wall, report


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=int, default=8)
    ap.add_argument("--budget", default="")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--data", default=os.environ.get("SOREN_BENCH_DIR", "/tmp/soren-bench"))
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    budget = args.budget or f"{(args.gib << 10) // 4}M"

    limits = json.loads(subprocess.run([tool("bench/bench-limits"), "--json"], check=True,
                                       capture_output=True, text=True).stdout.splitlines()[-1])
    pinned = limits["h2d_pinned_gbps"]
    path = make_input(args.data, args.gib)
    size = os.path.getsize(path)
    tiny = os.path.join(args.data, "text-1m")
    with open(os.path.join(args.data, "text-256m"), "rb") as f, open(tiny, "wb") as out:
        out.write(f.read(1 << 20))
    fixed_cmd = [tool("soren-host"), "run", "wordcount", tiny, "--device", "gpu", "-o",
                 os.path.join(args.data, "stream-tiny.tsv")]
    run_once(fixed_cmd)  # warm-up
    fixed = median([run_once(fixed_cmd)[0] for _ in range(args.runs)])
    configs = [("in memory", "gpu", []), (f"budget {budget}", "gpu", ["--device-memory", budget]),
               ("both engines", "both", [])]
    rows, first_out = [], None
    for name, device, extra in configs:
        out = os.path.join(args.data, f"stream-{len(rows)}.tsv")
        cmd = [tool("soren-host"), "run", "wordcount", path, "--device", device, "--explain",
               "-o", out] + extra
        run_once(cmd)  # warm-up
        walls, reports = [], []
        for _ in range(args.runs):
            wall, report = run_once(cmd)
            walls.append(wall)
            reports.append(report)
        if first_out is None:
            first_out = out
        same = files_equal(out, first_out)
        r = reports[walls.index(median(walls))] if args.runs % 2 else reports[-1]
        t = r["times_ms"]
        chunks = r.get("chunks", {})
        compute = t["split"] + t["monitor"] + t["map"]
        hidden = (t["upload"] + compute - chunks["inputs_ms"]) if chunks.get("inputs_ms") else 0.0
        gbps = size / (median(walls) / 1e3) / 1e9
        rows.append({
            "config": name, "command": shlex.join(cmd), "wall_ms": walls,
            "wall_ms_median": median(walls), "gbps": gbps, "fraction_of_pinned": gbps / pinned,
            "variant": r["variant"], "times_ms": t, "chunks": chunks,
            "hidden_copy_ms": hidden,
            "hidden_fraction": hidden / min(t["upload"], compute) if hidden else 0.0,
            "coprocessing": r.get("coprocessing", {}),
            "output_matches": same})
    whole = rows[0]["wall_ms_median"]
    print(f"wordcount, {size / 2**30:.0f} GiB from the page cache, {limits['gpu']}; "
          f"pinned host-to-device {pinned:.2f} GB/s, pageable {limits['h2d_pageable_gbps']:.2f} "
          f"GB/s; medians of {args.runs}\n")
    print("| run | variant | chunks | wall ms | GB/s | of pinned H2D | less the fixed cost | "
          "vs in memory | upload ms | split+map ms | inputs ms | inputs GB/s | copy hidden | "
          "same output |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        t, c = x["times_ms"], x["chunks"]
        x["fraction_less_fixed"] = size / ((x["wall_ms_median"] - fixed) / 1e3) / 1e9 / pinned
        inputs_gbps = size / (c["inputs_ms"] / 1e3) / 1e9 if c.get("inputs_ms") else 0.0
        print(f"| {x['config']} | {x['variant']} | {c.get('count', 1)} | "
              f"{x['wall_ms_median']:.1f} | {x['gbps']:.2f} | {x['fraction_of_pinned']:.2f} | "
              f"{x['fraction_less_fixed']:.2f} | {whole / x['wall_ms_median']:.2f} | "
              f"{t['upload']:.1f} | {t['split'] + t['monitor'] + t['map']:.1f} | "
              f"{c.get('inputs_ms', 0):.1f} | {inputs_gbps:.2f} | "
              f"{x['hidden_fraction']:.2f} | {'yes' if x['output_matches'] else 'NO'} |")
    print(f"\nThe fixed cost of a GPU run (1 MiB of the same text, median of {args.runs}): "
          f"{fixed:.1f} ms; \"less the fixed cost\" divides the input by the wall time less it.")
    for x in rows:
        b = x["coprocessing"]
        if b:
            share = b["gpu_bytes"] / max(b["gpu_bytes"] + b["cpu_bytes"], 1)
            print(f"\n--device both: the GPU mapped {share:.1%} of the input in {b['gpu_ms']:.1f} ms, "
                  f"the CPU engine the rest in {b['cpu_ms']:.1f} ms; folding both took "
                  f"{b['fold_ms']:.1f} ms; {whole / x['wall_ms_median']:.2f}x the GPU alone")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"limits": limits, "bytes": size, "runs": args.runs,
                       "fixed_ms": fixed, "fixed_command": shlex.join(fixed_cmd),
                       "results": rows}, f, indent=1)
            f.write("\n")
    return 0 if all(x["output_matches"] for x in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
