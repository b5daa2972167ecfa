#!/usr/bin/env python3
"""Scaling over the GPUs of one host, whole processes.

    devices_figures.py run BUNDLE WORK [--gpus 1,2,4] [--runs 5] [--size 8G]
                       [--scaling strong,weak] [--modes host,local,mpirun]
                       [--weak-modes host,local]
                       [--jobs wordcount-real,wordcount-generated,histogram,pageviewcount]
                       --json OUT.json
    devices_figures.py report OUT.json [MORE.json ...] --md REPORT.md --svg CHART.svg
    devices_figures.py self-test

`run` times whole `soren-host run` processes from a GPU bundle (BUNDLE: its
soren-host, soren-gen and bench/real-inputs.sh) over inputs it makes in WORK
and reads from the page cache:

  wordcount-real       the host's documentation text (real-inputs.sh --kinds text)
  wordcount-generated  soren-gen text --vocab 400000, 2 GiB written over and over
  histogram            soren-gen rgb, 2 GiB (whole pixels) written over and over
  pageviewcount        soren-gen weblog (combined log format, 20,000 URLs), 2 GiB
                       written over and over

Strong scaling runs SIZE on each GPU count G; weak scaling runs SIZE / max(G)
on each GPU (a prefix of the input cut at a record boundary).  Modes:

  host    through a resident host (soren-host serve), --devices G
  local   a plain process, --local --devices G
  mpirun  mpirun -np G --bind-to none, one rank per GPU, no --devices
          (from two GPUs: one rank runs as the plain process does)

Each configuration runs once with -o FILE (a warm-up whose output must equal
the one-GPU output of its input byte for byte), then RUNS times with -o
/dev/null; the median is reported.  One more run through the host with
--verbose records each rank's map, exchange and fold.

`report` writes the Markdown tables (medians, speedups over one GPU, weak-
scaling efficiency, every time) and an SVG chart of the strong-scaling
speedups from one or more result files.  `self-test` checks `report` on
made-up results (no GPU needed).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

GIB = 1 << 30
JOBS = {
    "wordcount-real": ("wordcount", "text"),
    "wordcount-generated": ("wordcount", "gen"),
    "histogram": ("histogram", "rgb"),
    "pageviewcount": ("pageviewcount", "log"),
}


def parse_size(text):
    m = re.fullmatch(r"(\d+)([GM]?)", text)
    if not m:
        sys.exit(f"devices_figures.py: --size: expected a size such as 8G, got {text}")
    return int(m.group(1)) * {"G": GIB, "M": 1 << 20, "": 1}[m.group(2)]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def repeat_to(src, dst, size, unit):
    """dst: src written over and over up to size bytes, cut to a multiple of unit."""
    size -= size % unit
    with open(src, "rb") as f:
        block = f.read()
    with open(dst, "wb") as out:
        left = size
        while left:
            piece = block[: min(len(block), left)]
            out.write(piece)
            left -= len(piece)


def prefix(src, dst, size, record):
    """dst: the first size bytes of src, cut after its last newline (record
    "line") or to a multiple of record bytes."""
    with open(src, "rb") as f, open(dst, "wb") as out:
        left = size
        while left:
            chunk = f.read(min(left, 64 << 20))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)
    with open(dst, "r+b") as out:
        end = out.seek(0, os.SEEK_END)
        if record == "line":
            back = min(end, 1 << 20)
            out.seek(end - back)
            tail = out.read(back)
            cut = tail.rfind(b"\n")
            out.truncate(end - back + cut + 1 if cut >= 0 else end)
        else:
            out.truncate(end - end % record)


def make_inputs(bundle, work, size, kinds):
    """The largest input of each kind, named KIND-SIZE in work."""
    paths = {}
    real = [k for k in ("text",) if k in kinds]
    if real:
        sh(["sh", os.path.join(bundle, "bench", "real-inputs.sh"), "--kinds", ",".join(real),
            work, human(size)], stdout=subprocess.DEVNULL)
        for k in real:
            paths[k] = os.path.join(work, f"{k}-{human(size)}")
    gen = os.path.join(bundle, "soren-gen")
    if "gen" in kinds:
        seed = os.path.join(work, "gen-seed")
        sh([gen, "text", "--size", "2G", "--vocab", "400000", "--seed", "13", "-o", seed])
        paths["gen"] = os.path.join(work, f"gen-{human(size)}")
        repeat_to(seed, paths["gen"], size, 1)
        os.unlink(seed)
    if "log" in kinds:
        seed = os.path.join(work, "log-seed")
        sh([gen, "weblog", "--size", "2G", "--urls", "20000", "--ips", "5000", "--seed", "41",
            "-o", seed])
        paths["log"] = os.path.join(work, f"log-{human(size)}")
        repeat_to(seed, paths["log"], size, 1)
        prefix(paths["log"], paths["log"] + ".lines", size, "line")
        os.replace(paths["log"] + ".lines", paths["log"])
        os.unlink(seed)
    if "rgb" in kinds:
        seed = os.path.join(work, "rgb-seed")
        sh([gen, "rgb", "--size", "2G", "--seed", "8", "-o", seed])
        paths["rgb"] = os.path.join(work, f"rgb-{human(size)}")
        repeat_to(seed, paths["rgb"], size, 3)
        os.unlink(seed)
    return paths


def human(size):
    return f"{size // GIB}G" if size % GIB == 0 else f"{size >> 20}M"


def timed(cmd, env):
    t0 = time.perf_counter()
    sh(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1e3


def mpirun(bundle):
    """The bundle's mpirun (Open MPI carried with it), else the PATH's."""
    own = os.path.join(bundle, "mpirun")
    return own if os.path.exists(own) else shutil.which("mpirun")


def command(bundle, mode, job, path, gpus, out, extra=()):
    host = os.path.join(bundle, "soren-host")
    if mode == "mpirun":
        return [mpirun(bundle), "-np", str(gpus), "--bind-to", "none", "--allow-run-as-root",
                "-x", "LD_LIBRARY_PATH", "-x", "SOREN_PLUGIN_PATH", host, "run", job, path,
                "-o", out, *extra]
    cmd = [host, "run", job, path, "-o", out, "--devices", str(gpus), *extra]
    return cmd + (["--local"] if mode == "local" else [])


RANK_LINE = re.compile(r"rank (\d+) of (\d+): stage (\d+): .*ms: map ([\d.]+), exchange ([\d.]+)"
                       r"(?:, fold ([\d.]+) on the (\w+)|; rank 0 folds its pairs)")


def ranks_of(bundle, job, path, gpus, env):
    """Each rank's map, exchange and fold of one run through the host."""
    p = subprocess.run(command(bundle, "host", job, path, gpus, "/dev/null", ["--verbose"]),
                       env=env, check=True, capture_output=True, text=True)
    return [{"rank": int(m[0]), "stage": int(m[2]), "map_ms": float(m[3]),
             "exchange_ms": float(m[4]), "fold_ms": float(m[5] or 0),
             "fold_device": m[6] or "none"} for m in RANK_LINE.findall(p.stderr)]


def run(args):
    bundle, work = os.path.abspath(args.bundle), os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    gpu_counts = [int(g) for g in args.gpus.split(",")]
    size = parse_size(args.size)
    jobs = args.jobs.split(",")
    for j in jobs:
        if j not in JOBS:
            sys.exit(f"devices_figures.py: --jobs: unknown {j}; expected {', '.join(JOBS)}")
    modes, weak_modes = args.modes.split(","), args.weak_modes.split(",")
    if "mpirun" in modes + weak_modes and not mpirun(bundle):
        sys.exit("devices_figures.py: --modes mpirun: no mpirun in the bundle or on the PATH")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(bundle, "lib"),
               SOREN_PLUGIN_PATH=os.path.join(bundle, "stage", "plugins"),
               SOREN_HOST=os.path.join(work, "host", "host.sock"))
    t0 = time.perf_counter()
    largest = make_inputs(bundle, work, size, {JOBS[j][1] for j in jobs})
    inputs_s = time.perf_counter() - t0
    sh([os.path.join(bundle, "soren-host"), "serve", "--detach"], env=env)
    results = []
    try:
        for name in jobs:
            job, kind = JOBS[name]
            unit = 3 if kind == "rgb" else "line"
            for scaling in args.scaling.split(","):
                reference = None
                for g in gpu_counts:
                    path = largest[kind]
                    if scaling == "weak":
                        each = size // max(gpu_counts)
                        path = os.path.join(work, f"{kind}-weak-{g}")
                        if g * each != size:
                            prefix(largest[kind], path, g * each, unit)
                        else:
                            path = largest[kind]
                    for mode in modes if scaling == "strong" else weak_modes:
                        if mode == "mpirun" and g == 1:
                            continue
                        out = os.path.join(work, f"out-{name}-{scaling}-{g}-{mode}")
                        cmd = command(bundle, mode, job, path, g, out)
                        timed(cmd, env)
                        with open(out, "rb") as f:
                            got = f.read()
                        if reference is None:
                            reference = got
                        same_as = (scaling != "weak" or g == gpu_counts[0])
                        equal = got == reference if same_as else None
                        ms = [timed(command(bundle, mode, job, path, g, "/dev/null"), env)
                              for _ in range(args.runs)]
                        row = {"job": name, "scaling": scaling, "gpus": g, "mode": mode,
                               "bytes": os.path.getsize(path), "ms": ms,
                               "median_ms": statistics.median(ms), "equal_one_gpu": equal,
                               "pairs": got.count(b"\n")}
                        if mode == "host" and g > 1:
                            row["ranks"] = ranks_of(bundle, job, path, g, env)
                        results.append(row)
                        save(args.json, describe(bundle, work, gpu_counts, size, args.runs,
                                                 inputs_s, results))
                        print(json.dumps({k: row[k] for k in row if k != "ranks"}), flush=True)
                        os.unlink(out)
                    if scaling == "weak" and path != largest[kind]:
                        os.unlink(path)
    finally:
        subprocess.run([os.path.join(bundle, "soren-host"), "stop"], env=env)


def describe(bundle, work, gpu_counts, size, runs, inputs_s, results):
    """The result file: what ran where, and every configuration so far."""
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.split("\n")[0].strip()
    with open(os.path.join(bundle, "COMMIT")) as f:
        commit = f.read().strip()
    sources = os.path.join(work, "SOURCES")
    return {"program": "devices_figures.py", "commit": commit, "gpu": gpu,
            "gpus": gpu_counts, "cpus": os.cpu_count(), "size": size, "runs": runs,
            "date": time.strftime("%Y-%m-%d"), "inputs_s": round(inputs_s, 1),
            "sources": open(sources).read() if os.path.exists(sources) else "",
            "results": results}


def save(path, doc):
    """Rewritten after each configuration, so a run cut short keeps what it measured."""
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


# ---- Report -----------------------------------------------------------------

MODE_NAMES = {"host": "through a resident host", "local": "plain process (`--local`)",
              "mpirun": "`mpirun`, a rank per GPU"}


def report(args):
    docs = [json.load(open(p)) for p in args.results]
    rows = [r for d in docs for r in d["results"]]
    gpu_counts = sorted({r["gpus"] for r in rows})
    md = []
    for d in docs:
        md.append(f"- `{d['program']}` at commit {d['commit']}, {d['date']}: {d['gpu']} x "
                  f"{max(d['gpus'])}, {d['cpus']} CPUs, {d['runs']} timed runs a configuration")
    md.append("")
    for scaling in ("strong", "weak"):
        sel = [r for r in rows if r["scaling"] == scaling]
        if not sel:
            continue
        md.append(f"### {scaling.capitalize()} scaling" +
                  (" (the same input on every GPU count)" if scaling == "strong"
                   else " (the same bytes per GPU)"))
        md.append("")
        head = ["job", "mode"] + [f"{g} GPU{'s' if g > 1 else ''}, ms" for g in gpu_counts]
        head += [f"{'speedup' if scaling == 'strong' else 'efficiency'} at {g}"
                 for g in gpu_counts[1:]]
        md.append("| " + " | ".join(head) + " |")
        md.append("|" + "---|" * len(head))
        for job in dict.fromkeys(r["job"] for r in sel):
            for mode in dict.fromkeys(r["mode"] for r in sel):
                by = {r["gpus"]: r for r in sel if r["job"] == job and r["mode"] == mode}
                if not by:
                    continue
                # mpirun -np 1 runs as the plain process does: its base
                one = by.get(gpu_counts[0]) or next(
                    (r for r in sel if r["job"] == job and r["mode"] == "local" and
                     r["gpus"] == gpu_counts[0]), None)
                cells = [job, MODE_NAMES[mode]]
                cells += [f"{by[g]['median_ms']:.0f}" if g in by else "" for g in gpu_counts]
                for g in gpu_counts[1:]:
                    if g not in by or not one:
                        cells.append("")
                    elif scaling == "strong":
                        cells.append(f"{one['median_ms'] / by[g]['median_ms']:.2f}x")
                    else:
                        cells.append(f"{one['median_ms'] / by[g]['median_ms']:.2f}")
                md.append("| " + " | ".join(cells) + " |")
        if "mpirun" in {r["mode"] for r in sel}:
            md.append("")
            md.append("`mpirun`'s ratios are over the plain process on one GPU, which `mpirun -np 1` "
                      "runs as.")
        md.append("")
    unequal = [r for r in rows if r["equal_one_gpu"] is False]
    checked = [r for r in rows if r["equal_one_gpu"] is not None]
    md.append(f"Outputs: {len(checked) - len(unequal)} of {len(checked)} runs that read the same "
              "input as one GPU wrote its bytes exactly" +
              ("." if not unequal else "; differ: " + ", ".join(
                  f"{r['job']} {r['mode']} {r['gpus']}" for r in unequal) + "."))
    md.append("")
    ranked = [r for r in rows if r.get("ranks")]
    if ranked:
        md.append("Each rank's part through the host, strong scaling (one `--verbose` run; ms, "
                  "stage 1; map includes the upload):")
        md.append("")
        md.append("| job | GPUs | map | exchange | fold | fold on |")
        md.append("|---|---|---|---|---|---|")
        for r in ranked:
            if r["scaling"] != "strong":
                continue
            st = [x for x in r["ranks"] if x["stage"] == 1]
            span = lambda k: f"{min(x[k] for x in st):.1f}-{max(x[k] for x in st):.1f}"
            md.append(f"| {r['job']} | {r['gpus']} | {span('map_ms')} | {span('exchange_ms')} | "
                      f"{span('fold_ms')} | {', '.join(sorted({x['fold_device'] for x in st}))} |")
        md.append("")
    md.append("Every time, ms:")
    md.append("")
    md.append("| job | scaling | mode | GPUs | bytes | runs |")
    md.append("|---|---|---|---|---|---|")
    for r in rows:
        md.append(f"| {r['job']} | {r['scaling']} | {r['mode']} | {r['gpus']} | {r['bytes']} | "
                  + ", ".join(f"{x:.0f}" for x in r["ms"]) + " |")
    with open(args.md, "w") as f:
        f.write("\n".join(md) + "\n")
    with open(args.svg, "w") as f:
        f.write(chart([r for r in rows if r["scaling"] == "strong"], gpu_counts))


def chart(rows, gpu_counts):
    """An SVG line chart: strong-scaling speedup over one GPU by GPU count,
    a line for each job and mode, and the ideal."""
    w, h, left, bottom, top, right = 640, 400, 60, 50, 20, 230
    most = max(gpu_counts)
    x = lambda g: left + (g - 1) / max(most - 1, 1) * (w - left - right)
    y = lambda s: h - bottom - s / most * (h - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>']
    for s in range(0, most + 1):
        out.append(f'<line x1="{left}" y1="{y(s):.1f}" x2="{w - right}" y2="{y(s):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{y(s) + 4:.1f}" text-anchor="end">{s}x</text>')
    for g in gpu_counts:
        out.append(f'<text x="{x(g):.1f}" y="{h - bottom + 18}" text-anchor="middle">{g}</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 10}" text-anchor="middle">GPUs</text>')
    out.append(f'<polyline fill="none" stroke="#999" stroke-dasharray="4 4" points="'
               + " ".join(f"{x(g):.1f},{y(g):.1f}" for g in gpu_counts) + '"/>')
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
              "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"]
    series = list(dict.fromkeys((r["job"], r["mode"]) for r in rows))
    for i, (job, mode) in enumerate(series):
        by = {r["gpus"]: r["median_ms"] for r in rows if r["job"] == job and r["mode"] == mode}
        if mode == "mpirun":
            by.update({r["gpus"]: r["median_ms"] for r in rows
                       if r["job"] == job and r["mode"] == "local" and r["gpus"] == gpu_counts[0]})
        if gpu_counts[0] not in by:
            continue
        pts = [(g, by[gpu_counts[0]] / by[g]) for g in gpu_counts if g in by]
        c = colors[i % len(colors)]
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="'
                   + " ".join(f"{x(g):.1f},{y(s):.1f}" for g, s in pts) + '"/>')
        ly = top + 14 * i
        out.append(f'<line x1="{w - right + 10}" y1="{ly}" x2="{w - right + 30}" y2="{ly}" '
                   f'stroke="{c}" stroke-width="2"/>')
        out.append(f'<text x="{w - right + 35}" y="{ly + 4}">{job}, {mode}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def self_test():
    """report on made-up figures: its ratios, mpirun's base, the outputs line
    and the chart.  Exits 1, naming what failed."""
    import tempfile

    def row(job, scaling, mode, gpus, ms, equal=True):
        return {"job": job, "scaling": scaling, "mode": mode, "gpus": gpus, "bytes": 1,
                "ms": [ms] * 3, "median_ms": ms, "equal_one_gpu": equal, "pairs": 1}

    rows = [row("wordcount-real", "strong", "host", 1, 300.0),
            row("wordcount-real", "strong", "host", 2, 200.0),
            row("wordcount-real", "strong", "host", 4, 120.0, equal=False),
            row("wordcount-real", "strong", "local", 1, 600.0),
            row("wordcount-real", "strong", "mpirun", 2, 1200.0),
            row("wordcount-real", "weak", "host", 1, 100.0),
            row("wordcount-real", "weak", "host", 2, 125.0, equal=None)]
    rows[1]["ranks"] = [{"rank": 0, "stage": 1, "map_ms": 150.0, "exchange_ms": 10.0,
                         "fold_ms": 3.5, "fold_device": "gpu"},
                        {"rank": 1, "stage": 1, "map_ms": 148.0, "exchange_ms": 12.0,
                         "fold_ms": 0.0, "fold_device": "none"}]
    doc = {"program": "devices_figures.py", "commit": "0000000", "gpu": "Made-up GPU",
           "gpus": [1, 2, 4], "cpus": 8, "size": 1, "runs": 3, "date": "2000-01-01",
           "results": rows}
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "r.json")
        with open(src, "w") as f:
            json.dump(doc, f)
        md, svg = os.path.join(tmp, "r.md"), os.path.join(tmp, "r.svg")
        report(argparse.Namespace(results=[src], md=md, svg=svg))
        text, chart_text = open(md).read(), open(svg).read()
    for want in ("| wordcount-real | through a resident host | 300 | 200 | 120 | 1.50x | 2.50x |",
                 "| wordcount-real | `mpirun`, a rank per GPU |  | 1200 |  | 0.50x |  |",
                 "| wordcount-real | through a resident host | 100 | 125 |  | 0.80 |  |",
                 "Outputs: 5 of 6 runs", "differ: wordcount-real host 4",
                 "| wordcount-real | 2 | 148.0-150.0 | 10.0-12.0 | 0.0-3.5 | gpu, none |",
                 "at commit 0000000, 2000-01-01: Made-up GPU x 4"):
        if want not in text:
            failures.append(f"the report lacks {want!r}")
    if not (chart_text.startswith("<svg") and chart_text.rstrip().endswith("</svg>") and
            "wordcount-real, host" in chart_text and "wordcount-real, mpirun" in chart_text):
        failures.append("the chart lacks its series")
    for f in failures:
        print(f"devices_figures.py self-test: {f}")
    if failures:
        sys.exit(1)
    print("devices_figures.py self-test: ok")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("bundle")
    r.add_argument("work")
    r.add_argument("--gpus", default="1,2,4")
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--size", default="8G")
    r.add_argument("--scaling", default="strong,weak")
    r.add_argument("--modes", default="host,local,mpirun")
    r.add_argument("--weak-modes", default="host,local")
    r.add_argument("--jobs", default=",".join(JOBS))
    r.add_argument("--json", required=True)
    p = sub.add_parser("report")
    p.add_argument("results", nargs="+")
    p.add_argument("--md", required=True)
    p.add_argument("--svg", required=True)
    sub.add_parser("self-test")
    args = ap.parse_args(argv)
    {"run": run, "report": report, "self-test": lambda a: self_test()}[args.what](args)


if __name__ == "__main__":
    main(sys.argv[1:])
