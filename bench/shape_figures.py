#!/usr/bin/env python3
"""shape_figures.py - what the map's launch shape search finds: each job's
candidate shapes timed side by side by a resident host's session, and the
map time of the runs that follow with the shape kept.

    bench/shape_figures.py BUNDLE WORKDIR [--size 1G] [--after N] [--json OUT]
    bench/shape_figures.py --report IN.json

BUNDLE is a GPU bundle (make gpu-bundle) or a build tree.  Inputs, made in
WORKDIR at --size: the host's documentation text (bench/real-inputs.sh),
soren-gen text, a web log, HTML pages and RGB pixels.  A host started for
the run serves every job; each job runs through it with --explain until
its session has timed every candidate on two inputs, then N more times
(default 3).  The first run writes its output to a file, which must equal
the CPU engine's (--device cpu --local) byte for byte.  Each line of the
report: a job's candidates (threads a block, per-block table entries) with
the map's nanoseconds a byte the search measured, the shape kept and why,
and the median map time of the runs after the search.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from devices_figures import human, make_inputs, parse_size, sh  # noqa: E402

JOBS = [
    # (label, job, input kind, extra arguments)
    ("wordcount, real text", "wordcount", "text", []),
    ("wordcount, generated text", "wordcount", "gen", []),
    ("grep ^qu.?$, real text", "grep", "text", ["-p", "pattern=^qu.?$"]),
    ("stringmatch thing, real text", "stringmatch", "text", ["-p", "pattern=thing"]),
    ("pageviewcount, web log", "pageviewcount", "log", []),
    ("invertedindex, HTML", "invertedindex", "html", []),
    ("histogram, RGB", "histogram", "rgb", []),
]


def explain_of(stderr):
    return json.loads(stderr[stderr.index("{"):].splitlines()[0])


def through_host(host, sock, job, path, extra, out, env):
    p = subprocess.run([host, "--socket", sock, "run", job, path, "-o", out, "--explain",
                        "--device", "gpu", *extra], env=env, check=True, capture_output=True,
                       text=True)
    return explain_of(p.stderr)


def measure(args):
    bundle, work = os.path.abspath(args.bundle), os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    host = os.path.join(bundle, "soren-host")
    size = parse_size(args.size)
    paths = make_inputs(bundle, work, size, {"text", "gen", "log", "rgb"})
    paths["html"] = os.path.join(work, f"html-{human(size)}")
    sh([os.path.join(bundle, "soren-gen"), "html", "--size", human(size), "--seed", "1",
        "-o", paths["html"]])
    env = dict(os.environ)
    sock_dir = tempfile.mkdtemp(prefix="soren-shape-")
    os.chmod(sock_dir, 0o700)
    sock = os.path.join(sock_dir, "host.sock")
    sh([host, "--socket", sock, "serve", "--detach"], env=env)
    rows = []
    try:
        for label, job, kind, extra in JOBS:
            want, got = os.path.join(work, "cpu.out"), os.path.join(work, "gpu.out")
            sh([host, "run", job, paths[kind], "-o", want, "--local", "--device", "cpu", *extra],
               env=env)
            runs = [through_host(host, sock, job, paths[kind], extra, got, env)]
            with open(want, "rb") as a, open(got, "rb") as b:
                if a.read() != b.read():
                    sys.exit(f"shape_figures: {label}: the GPU's output differs from the CPU "
                             "engine's")
            def searching(x):
                s = x.get("shape", {})
                return len(s.get("candidates", [])) > 1 and s["timed"] < 2 * len(s["candidates"])
            # inputs too short to time leave the search where it was
            stalled = 0
            while searching(runs[-1]) and stalled < 3:
                runs.append(through_host(host, sock, job, paths[kind], extra, "/dev/null", env))
                moved = runs[-1]["shape"]["timed"] > runs[-2].get("shape", {}).get("timed", 0)
                stalled = 0 if moved else stalled + 1
            after = [through_host(host, sock, job, paths[kind], extra, "/dev/null", env)
                     for _ in range(args.after)]
            last = (after or runs)[-1]
            rows.append({"label": label, "job": job, "input": kind, "bytes": size,
                         "variant": last["variant"], "searching_runs": len(runs),
                         "shape": last.get("shape"),
                         "map_ms_after": [x["times_ms"]["map"] for x in after]})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        subprocess.run([host, "--socket", sock, "stop"], env=env)
    doc = {"size": size, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    report(doc)


def shape_name(c):
    threads = c["block_threads"] or "occupancy"
    return f"{threads}/{c['block_slots']}" if c["block_slots"] else f"{threads}"


def report(doc):
    print("| job | variant | candidates (threads/table: ns a byte) | kept | against the default "
          "| map ms after (median) |")
    print("|---|---|---|---|---|---|")
    for r in doc["rows"]:
        s = r["shape"] or {}
        cands = s.get("candidates", [])
        rates = [c["ns_per_unit"] for c in cands]
        text = ", ".join(f"{shape_name(c)}: {c['ns_per_unit']:.4f}" if c["ns_per_unit"]
                         is not None else f"{shape_name(c)}: -" for c in cands)
        kept = next((i for i, c in enumerate(cands)
                     if c["block_threads"] == s["block_threads"]
                     and c["block_slots"] == s["block_slots"]), 0)
        gain = (f"{rates[0] / rates[kept]:.3f}x" if rates and rates[0] and rates[kept]
                else "-")
        after = statistics.median(r["map_ms_after"]) if r["map_ms_after"] else float("nan")
        print(f"| {r['label']} | {r['variant']} | {text} | {shape_name(s) if s else '-'} "
              f"({s.get('rule', '')}) | {gain} | {after:.2f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle", nargs="?")
    ap.add_argument("work", nargs="?")
    ap.add_argument("--size", default="1G")
    ap.add_argument("--after", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--report")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            report(json.load(f))
    elif args.bundle and args.work:
        measure(args)
    else:
        ap.error("BUNDLE and WORKDIR, or --report IN.json")


if __name__ == "__main__":
    main()
