#!/usr/bin/env python3
"""The GPU and the CPU engine together (--device both) against the GPU alone.

    both_figures.py BUNDLE WORK [--size 8G] [--small-size 1G] [--runs 5] [--rounds 2]
                    [--jobs wordcount-real,wordcount-generated,histogram,kmeans,slowmap]
                    [--threads auto,16] --json OUT.json

Times whole `soren-host run` processes through a resident host (one GPU:
the host's sessions and CUDA context are up, so what differs is the run)
over inputs made in WORK and read from the page cache: SIZE bytes of
devices_figures.py's inputs for its jobs, and SMALL-SIZE bytes for two
jobs whose GPU map, not their upload, bounds them:

  kmeans   one step over soren-gen points (3 dimensions), 256 centroids
  slowmap  the test job whose map waits 2,000,000 clock cycles a line on the
           GPU (stage/test-plugins), over the real text's first SMALL-SIZE
           bytes  Each round runs every configuration RUNS times in
turn: `--device gpu`, then `--device both` with each --threads value
(auto: the CPU engine's default, the CPUs the GPU's copy threads leave
free).  Each configuration's output (one run with -o FILE) must equal the
GPU's byte for byte; one run with --explain records how the pieces went.
Prints a Markdown table: medians, both against the GPU alone, and the
sharing.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from devices_figures import JOBS, human, make_inputs, parse_size, prefix, sh, timed  # beside this script

MAP_BOUND = ("kmeans", "slowmap")


def map_bound_job(bundle, work, name, text, size):
    """(job, input, extra arguments) of a map-bound job over size bytes."""
    gen = os.path.join(bundle, "soren-gen")
    if name == "kmeans":
        points, centroids = os.path.join(work, "points"), os.path.join(work, "centroids")
        sh([gen, "points", "--count", str(size // 12), "--dims", "3", "--seed", "7", "-o", points])
        sh([gen, "points", "--dims", "3", "--centroids", "256", "--clusters", "256", "--seed",
            "7", "-o", centroids])
        return "kmeans", points, ["--param", "k=256", "--param", f"centroids=@{centroids}"]
    lines = os.path.join(work, "text-small")
    prefix(text, lines, size, "line")
    return (os.path.join(bundle, "stage", "test-plugins", "slowmap.json"), lines,
            ["--param", "cycles=2000000"])


def configs(threads):
    out = [("gpu", ["--device", "gpu"])]
    for t in threads:
        extra = ["--device", "both"] + ([] if t == "auto" else ["--threads", t])
        out.append((f"both, threads {t}", extra))
    return out


def explain(host, job, path, extra, env):
    p = subprocess.run([host, "run", job, path, "-o", "/dev/null", "--explain", *extra],
                       env=env, check=True, capture_output=True, text=True)
    return json.loads(p.stderr[p.stderr.index("{"):])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("work")
    ap.add_argument("--size", default="8G")
    ap.add_argument("--small-size", default="1G")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs",
                    default="wordcount-real,wordcount-generated,histogram,kmeans,slowmap")
    ap.add_argument("--threads", default="auto,16")
    ap.add_argument("--json", required=True)
    args = ap.parse_args(argv)
    bundle, work = os.path.abspath(args.bundle), os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    size, small = parse_size(args.size), parse_size(args.small_size)
    jobs = args.jobs.split(",")
    for j in jobs:
        if j not in JOBS and j not in MAP_BOUND:
            sys.exit(f"both_figures.py: --jobs: unknown {j}; expected "
                     f"{', '.join(list(JOBS) + list(MAP_BOUND))}")
    host = os.path.join(bundle, "soren-host")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(bundle, "lib"),
               SOREN_PLUGIN_PATH=os.path.join(bundle, "stage", "plugins"),
               SOREN_HOST=os.path.join(work, "host", "host.sock"))
    kinds = {JOBS[j][1] for j in jobs if j in JOBS} | ({"text"} if "slowmap" in jobs else set())
    inputs = make_inputs(bundle, work, size, kinds)
    runs = {j: (JOBS[j][0], inputs[JOBS[j][1]], []) if j in JOBS
            else map_bound_job(bundle, work, j, inputs.get("text"), small) for j in jobs}
    cfgs = configs(args.threads.split(","))
    sh([host, "serve", "--detach"], env=env)
    rows = []
    try:
        for name in jobs:
            job, path, params = runs[name]
            reference = None
            ms = {c: [] for c, _ in cfgs}
            equal, sharing = {}, {}
            for c, how in cfgs:
                extra = params + how
                out = os.path.join(work, "out")
                timed([host, "run", job, path, "-o", out, *extra], env)  # warm-up
                with open(out, "rb") as f:
                    got = f.read()
                reference = got if reference is None else reference
                equal[c] = got == reference
                os.unlink(out)
                sharing[c] = explain(host, job, path, extra, env).get("coprocessing")
            for _ in range(args.rounds):
                for c, how in cfgs:
                    ms[c] += [timed([host, "run", job, path, "-o", "/dev/null", *params, *how],
                                    env) for _ in range(args.runs)]
            gpu = statistics.median(ms["gpu"])
            for c, _ in cfgs:
                m = statistics.median(ms[c])
                rows.append({"job": name, "config": c, "bytes": os.path.getsize(path),
                             "ms": ms[c], "median_ms": m, "against_gpu": gpu / m,
                             "equal_gpu": equal[c], "coprocessing": sharing[c]})
                print(json.dumps({k: rows[-1][k] for k in rows[-1] if k != "ms"}), flush=True)
    finally:
        subprocess.run([host, "stop"], env=env)
    doc = {"command": " ".join(["both_figures.py"] + argv), "host": platform.node(),
           "cpus": os.cpu_count(), "size": human(size), "small_size": human(small),
           "runs": args.runs,
           "rounds": args.rounds, "date": time.strftime("%Y-%m-%d"), "results": rows}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"\nThrough a resident host, {os.cpu_count()} CPUs; medians of "
          f"{args.rounds} x {args.runs} runs\n")
    print("| job | bytes | run | median ms | against the GPU alone | CPU threads | CPU pieces | "
          "CPU bytes | fold | fold ms | same output |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["coprocessing"] or {}
        print(f"| {r['job']} | {r['bytes']} | {r['config']} | {r['median_ms']:.1f} | "
              f"{r['against_gpu']:.2f}x | "
              f"{s.get('cpu_threads', '')} | {s.get('cpu_pieces', '')} of {s.get('pieces', '')} | "
              f"{s.get('cpu_bytes', '')} | {s.get('fold', '')} | "
              f"{s.get('fold_ms', 0):.1f} | {'yes' if r['equal_gpu'] else 'NO'} |"
              if s else
              f"| {r['job']} | {r['bytes']} | {r['config']} | {r['median_ms']:.1f} | 1.00x | | | | | | "
              f"{'yes' if r['equal_gpu'] else 'NO'} |")
    return 0 if all(r["equal_gpu"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
