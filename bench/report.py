#!/usr/bin/env python3
"""report.py - the benchmark report of `make bench` from one results file.

    report.py RESULTS.json OUTDIR     writes OUTDIR/STEM.md, STEM-fig3-speedup.png
                                      and STEM-fig4-phases.png (STEM: RESULTS's name
                                      without .json); without matplotlib, only the
                                      Markdown, which says the charts were skipped
    report.py --self-test             runs the report on a small synthetic file in a
                                      temporary folder and checks what it wrote

Standard library only, plus matplotlib for the charts where it is installed.

RESULTS.json is what the benchmark driver writes, for example (figures made up):

    {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "date": "2026-11-23",
     "commit": "0a3b309", "host_cpus": 16,
     "limits": {"d2d_gbps": 3023.0, "h2d_pinned_gbps": 54.7, "h2d_pageable_gbps": 7.5,
                "d2h_pinned_gbps": 55.1, "command": "bench/bench-limits --json"},
     "results": [
       {"app": "wordcount", "size": "1GiB", "input_bytes": 1073741824,
        "config": "auto", "variant": "hash", "runs": 5,
        "wall_ms": [541, 540, 545, 539, 542], "device_ms": [79.9, 80.1, 80.0, 79.8, 80.2],
        "phases_ms": {"upload": 42, "split": 3.6, "monitor": 2.6, "map": 70.1,
                      "merge": 2.5, "reduce": 0, "sort": 2.6, "download": 12},
        "bytes_read": 1073741824, "output_matches": true,
        "command": "soren-host run wordcount --engine auto ..."},
       ...]}

config is one of auto, hash, block, direct, dense, sort (a GPU variant forced with
--engine, or auto), cpu (the CPU engine: device_ms null) or cub (the CUB baseline,
whose phases_ms has its own phase names).  Every figure below is a median of the
runs; every ratio is a ratio of medians.  A figure that a missing run would need
is written n/a.

A row's "input" is "generated" (soren-gen's; a row without "input" is one) or
"real" (bench/real-inputs.sh's, of the same size); a real row's "source" is its
input's key in "real_inputs", which holds, once per input, its kind, bytes, file
and the lines of its SOURCES, or why the host could not make it ("skipped", as
the row of each job that would have used it says):

     "real_inputs": {"text-10485760": {"kind": "text", "bytes": 10485760,
                                       "file": "/tmp/soren-bench/real-text-10485760/...",
                                       "sources": ["text: 299 files, ...", ...]},
                     "weblog-5242858": {"kind": "weblog", "skipped": "no web server ..."}}

Sections (a) to (e) and the targets are on the generated inputs; (f) sets the
real ones beside them, and the last section lists where each real input came from.
"""

import json
import math
import os
import statistics
import sys
import tempfile

DEVICE_PHASES = ["split", "monitor", "map", "merge", "reduce", "sort"]
ALL_PHASES = ["upload"] + DEVICE_PHASES + ["download"]
NA = "n/a"
# Jobs of index input: their data go up as parameters, before the run's
# phases, so they have no upload phase to set against the bus.
PARAM_INPUT_APPS = {"matmul", "simscore"}

# The targets the report checks: (label, how it is measured, threshold, unit).
TARGET_ROWS = [
    ("wordcount: auto >= 10x sort", "device time of sort / device time of auto, largest size", 10.0, "x"),
    ("wordcount: auto >= 2x the CUB baseline", "device time of cub / device time of auto, largest size", 2.0, "x"),
    ("wordcount: >= 30 GB/s on device-resident input", "input bytes / device time of auto, largest size", 30.0, " GB/s"),
    ("histogram: >= 0.8x cub::DeviceHistogram", "device time of cub / device time of auto, largest size", 0.8, "x"),
    ("GPU >= 20x the CPU engine on wordcount", "wall time of cpu / wall time of auto, largest size", 20.0, "x"),
]


# ---- Reading -------------------------------------------------------------------

def median(values):
    """The median of the numbers in values (None and missing ignored), or None."""
    if not values:
        return None
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(nums) if nums else None


def ratio(num, den):
    if num is None or den is None or den <= 0:
        return None
    return num / den


class Results:
    """The rows of one input (generated or real) of the results file, indexed by
    (app, size, config)."""

    def __init__(self, data, which="generated"):
        self.data = data
        self.limits = data.get("limits") or {}
        self.rows = {}
        self.apps = []
        self.sizes = {}  # app -> [(input_bytes, size)] in increasing order
        for r in data.get("results") or []:
            app, size, config = r.get("app"), r.get("size"), r.get("config")
            if app is None or size is None or config is None:
                continue
            if r.get("input", "generated") != which:
                continue
            self.rows.setdefault((app, size, config), r)  # the first of duplicates
            if app not in self.apps:
                self.apps.append(app)
            known = self.sizes.setdefault(app, [])
            if size not in [s for _, s in known]:
                known.append((r.get("input_bytes") or 0, size))
        for app in self.sizes:
            self.sizes[app].sort()

    def get(self, app, size, config):
        return self.rows.get((app, size, config))

    def sizes_of(self, app):
        return [s for _, s in self.sizes.get(app, [])]

    def largest(self, app):
        sizes = self.sizes_of(app)
        return sizes[-1] if sizes else None

    def configs(self, app, size):
        return [c for (a, s, c) in self.rows if a == app and s == size]

    def device_ms(self, app, size, config):
        r = self.get(app, size, config)
        return median(r.get("device_ms")) if r else None

    def wall_ms(self, app, size, config):
        r = self.get(app, size, config)
        return median(r.get("wall_ms")) if r else None

    def input_bytes(self, app, size):
        for (a, s, _), r in self.rows.items():
            if a == app and s == size and r.get("input_bytes"):
                return r["input_bytes"]
        return None


# ---- Formatting ------------------------------------------------------------------

def fmt(v, digits=2, suffix=""):
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return NA
    return f"{v:.{digits}f}{suffix}"


def fmt_bytes(n):
    if not n:
        return NA
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{n} B"


def fmt_match(r):
    if r is None:
        return NA
    m = r.get("output_matches")
    return "yes" if m is True else "**NO**" if m is False else NA


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def gbps(nbytes, ms):
    """Bytes over milliseconds in GB/s (1e9 bytes a second)."""
    if not nbytes or ms is None or ms <= 0:
        return None
    return nbytes / (ms * 1e-3) / 1e9


# ---- The sections ------------------------------------------------------------------

def header(res, stem):
    d, lim = res.data, res.limits
    lines = [f"# Soren benchmark: {d.get('gpu', 'unknown GPU')}, {d.get('date', 'undated')}", ""]
    lines.append(table(["", ""], [
        ["GPU", d.get("gpu", NA)],
        ["driver", d.get("driver", NA)],
        ["date", d.get("date", NA)],
        ["commit", d.get("commit", NA)],
        ["host CPUs", d.get("host_cpus", NA)],
        ["device-to-device copy", fmt(lim.get("d2d_gbps"), 1, " GB/s") + " (bytes read plus written)"],
        ["host-to-device, pinned", fmt(lim.get("h2d_pinned_gbps"), 2, " GB/s")],
        ["host-to-device, pageable", fmt(lim.get("h2d_pageable_gbps"), 2, " GB/s")],
        ["device-to-host, pinned", fmt(lim.get("d2h_pinned_gbps"), 2, " GB/s")],
        ["limits command", f"`{lim['command']}`" if lim.get("command") else NA],
    ]))
    lines += ["", f"Raw figures and the exact command of each run: `{stem}.json`.",
              "Every figure is a median of the runs, every ratio a ratio of medians. "
              "*Device ms* is the time on the GPU from CUDA events with the input already in "
              "device memory (the upload excluded); *wall ms* is one run through libsoren "
              "(bench/soren-bench), from mapping the input to the result in host memory, after "
              "a warm-up run in the same process (so without creating the CUDA context). "
              "The CUB baselines' device ms include copying their result back to the host. "
              "n/a: the run that the figure needs is missing.", ""]
    return lines


def section_speedup(res):
    rows = []
    for app in res.apps:
        for size in res.sizes_of(app):
            sort_d, auto_d = res.device_ms(app, size, "sort"), res.device_ms(app, size, "auto")
            sort_w, auto_w = res.wall_ms(app, size, "sort"), res.wall_ms(app, size, "auto")
            if res.get(app, size, "sort") is None and res.get(app, size, "auto") is None:
                continue
            auto = res.get(app, size, "auto")
            rows.append([app, size, fmt_bytes(res.input_bytes(app, size)),
                         (auto or {}).get("variant", NA), fmt(sort_d), fmt(auto_d),
                         fmt(ratio(sort_d, auto_d), 2, "x"), fmt(ratio(sort_w, auto_w), 2, "x")])
    return ["## (a) auto against sort (the Soren paper's Fig. 3)", "",
            "The speedup of the adaptive engine (`--engine auto`) over the Mars design "
            "(`--engine sort`), by device time; wall time for comparison.", "",
            table(["app", "size", "input", "auto ran", "sort device ms", "auto device ms",
                   "speedup (device)", "speedup (wall)"], rows) if rows else "No auto or sort runs.", ""]


def section_phases(res):
    rows = []
    for app in res.apps:
        for size in res.sizes_of(app):
            r = res.get(app, size, "auto")
            if r is None:
                continue
            ph = r.get("phases_ms") or {}
            rows.append([app, size, r.get("variant", NA)] + [fmt(ph.get(p)) for p in ALL_PHASES]
                        + [fmt(res.device_ms(app, size, "auto"))])
    return ["## (b) Where auto spends its time (the Soren paper's Fig. 4)", "",
            "Median milliseconds of each phase of `--engine auto`; upload and download are "
            "the copies over PCIe, the others run on the device.", "",
            table(["app", "size", "ran"] + ALL_PHASES + ["device ms"], rows)
            if rows else "No auto runs.", ""]


def section_cpu(res):
    rows = []
    for app in res.apps:
        for size in res.sizes_of(app):
            cpu_w, auto_w = res.wall_ms(app, size, "cpu"), res.wall_ms(app, size, "auto")
            if res.get(app, size, "cpu") is None:
                continue
            rows.append([app, size, fmt(cpu_w, 1), fmt(auto_w, 1), fmt(ratio(cpu_w, auto_w), 2, "x"),
                         fmt_match(res.get(app, size, "cpu")), fmt_match(res.get(app, size, "auto"))])
    cpus = res.data.get("host_cpus", NA)
    return ["## (c) The GPU against the CPU engine", "",
            f"Wall time of one run, the CPU engine on {cpus} threads against "
            "`--device gpu --engine auto` (the upload and the download included; the CUDA "
            "context, made once a process, is not).", "",
            table(["app", "size", "cpu wall ms", "gpu auto wall ms", "gpu speedup",
                   "cpu output ok", "gpu output ok"], rows) if rows else "No CPU engine runs.", ""]


def section_cub(res):
    rows = []
    for app in res.apps:
        for size in res.sizes_of(app):
            cub = res.get(app, size, "cub")
            if cub is None:
                continue
            cub_d, auto_d = res.device_ms(app, size, "cub"), res.device_ms(app, size, "auto")
            rows.append([app, size, fmt(cub_d), fmt(auto_d), fmt(ratio(cub_d, auto_d), 2, "x"),
                         fmt_match(cub)])
    return ["## (d) auto against the CUB baselines", "",
            "Device time of `bench/cub-wordcount` and `bench/cub-histogram` (written directly "
            "against CUB) against `--engine auto` on the same input; above 1x auto is faster. "
            "\"output ok\": the baseline's output equals Soren's byte for byte.", "",
            table(["app", "size", "cub device ms", "auto device ms", "auto speedup",
                   "output ok"], rows) if rows else "No CUB baseline runs.", ""]


def section_limits(res):
    lim = res.limits
    read_bound = lim.get("d2d_gbps") / 2 if lim.get("d2d_gbps") else None
    pinned = lim.get("h2d_pinned_gbps")
    rows = []
    for app in res.apps:
        for size in res.sizes_of(app):
            for config in ("auto", "cub"):
                r = res.get(app, size, config)
                if r is None:
                    continue
                dev = gbps(r.get("bytes_read"), res.device_ms(app, size, config))
                up = None if app in PARAM_INPUT_APPS else gbps(
                    r.get("input_bytes"), (r.get("phases_ms") or {}).get("upload"))
                rows.append([app, size, config, fmt_bytes(r.get("bytes_read")), fmt(dev, 1),
                             fmt(ratio(dev, read_bound), 3), fmt(up, 1), fmt(ratio(up, pinned), 3)])
    return ["## (e) Fractions of the hardware limits", "",
            "Device: the bytes the job must read from device memory (the input, for jobs that "
            "read input) over its device time, as a fraction of the read bandwidth, taken as "
            f"half the device-to-device copy figure ({fmt(read_bound, 1, ' GB/s')}): that copy "
            "counts bytes read plus written, and a job that reads once and writes little is "
            "bounded by reading.  Upload: input bytes over the upload phase, as a fraction of "
            f"pinned host-to-device bandwidth ({fmt(pinned, 2, ' GB/s')}); n/a for "
            f"{', '.join(sorted(PARAM_INPUT_APPS))}, whose data go up as parameters.", "",
            table(["app", "size", "config", "bytes read", "device GB/s", "of read bound",
                   "upload GB/s", "of pinned h2d"], rows) if rows else "No auto or cub runs.", ""]


def targets(res):
    """[(label, measure, threshold, unit, measured, size)] for the five targets."""
    wc, hist = res.largest("wordcount"), res.largest("histogram")
    out = []
    dev = lambda app, size, c: res.device_ms(app, size, c) if size else None
    vals = [
        (ratio(dev("wordcount", wc, "sort"), dev("wordcount", wc, "auto")), wc),
        (ratio(dev("wordcount", wc, "cub"), dev("wordcount", wc, "auto")), wc),
        (gbps(res.input_bytes("wordcount", wc) if wc else None, dev("wordcount", wc, "auto")), wc),
        (ratio(dev("histogram", hist, "cub"), dev("histogram", hist, "auto")), hist),
        (ratio(res.wall_ms("wordcount", wc, "cpu") if wc else None,
               res.wall_ms("wordcount", wc, "auto") if wc else None), wc),
    ]
    for (label, measure, threshold, unit), (value, size) in zip(TARGET_ROWS, vals):
        out.append((label, measure, threshold, unit, value, size))
    return out


def section_targets(res):
    rows = []
    for label, measure, threshold, unit, value, size in targets(res):
        verdict = NA if value is None else "met" if value >= threshold else "**missed**"
        digits = 1 if unit.strip() == "GB/s" else 2
        rows.append([label, measure, size or NA, fmt(value, digits, unit),
                     fmt(threshold, digits, unit), verdict])
    bad = [f"{a} {s} {c}" for (a, s, c), r in res.rows.items() if r.get("output_matches") is False]
    lines = ["## Targets", "", table(["target", "measured as", "size", "measured", "target",
                                      "verdict"], rows), ""]
    if bad:
        lines += ["Outputs that did not match: " + ", ".join(bad) + ".", ""]
    return lines


def section_real(gen, real):
    """Real inputs beside generated ones, for every job and size that ran on a real one."""
    rows = []
    for app in real.apps:
        for size in real.sizes_of(app):
            cols = []
            for res in (gen, real):
                cols.append([(res.get(app, size, "auto") or {}).get("variant", NA),
                             fmt(res.device_ms(app, size, "auto")),
                             fmt(res.wall_ms(app, size, "auto"), 1),
                             fmt(res.wall_ms(app, size, "cpu"), 1),
                             fmt(ratio(res.wall_ms(app, size, "cpu"),
                                       res.wall_ms(app, size, "auto")), 2, "x"),
                             fmt(ratio(res.device_ms(app, size, "cub"),
                                       res.device_ms(app, size, "auto")), 2, "x")])
            # each figure's generated column, then its real one
            rows.append([app, size, fmt_bytes(real.input_bytes(app, size))]
                        + [c for pair in zip(*cols) for c in pair])
    header = ["app", "size", "input"]
    for name in ("auto ran", "auto device ms", "auto wall ms", "cpu wall ms", "gpu vs cpu",
                 "gpu vs cub"):
        header += [f"{name}, generated", f"{name}, real"]
    return ["## (f) Real inputs beside generated ones", "",
            "Each job of text, RGB or web logs on its generated input (`soren-gen`) and on a "
            "real one of the same size (`bench/real-inputs.sh`, from the files listed below): "
            "`--engine auto`'s variant, device and wall time, the CPU engine's wall time, and "
            "the ratios of (c) and (d): the CPU engine's wall time over auto's, the CUB "
            "baseline's device time over auto's (above 1x the GPU is faster).", "",
            table(header, rows), ""]


def section_sources(data, most=20):
    """Where each real input came from: its SOURCES, the first files of each kind."""
    lines = ["## Real inputs: where they came from", "",
             "Each real input is the files below concatenated in this order, repeated and cut "
             "to its size (the SOURCES of `bench/real-inputs.sh`; a long list is cut here, the "
             "results file has it whole); an input the host could not make is skipped, saying "
             "why.", ""]
    made = data.get("real_inputs") or {}
    users = {}
    for r in data.get("results") or []:
        if r.get("input") == "real" and r.get("source"):
            apps = users.setdefault(r["source"], [])
            if r.get("app") not in apps:
                apps.append(r.get("app"))
    for key in sorted(set(made) | set(users)):
        info = made.get(key, {})
        used = ", ".join(a for a in users.get(key, []) if a) or "no job"
        if "skipped" in info:
            lines += [f"- `{key}` ({used}): skipped: {info['skipped']}", ""]
            continue
        lines += [f"- `{key}`, {fmt_bytes(info.get('bytes'))} ({used})" +
                  (f": `{info['command']}`" if info.get("command") else ""), ""]
        shown, files = [], 0
        for line in info.get("sources") or []:
            if line.startswith("    ") or (line.startswith("  ") and not line.startswith("  #")
                                           and line[2:3].isdigit()):
                files += 1
                if files > most:
                    continue
            elif files > most:
                shown.append(f"  ... and {files - most} more")
                files = 0
            else:
                files = 0
            shown.append(line)
        if files > most:
            shown.append(f"  ... and {files - most} more")
        lines += ["  ```", *("  " + l for l in shown), "  ```", ""] if shown else \
            ["  (no SOURCES in the results file)", ""]
    if not made and not users:
        lines += ["No real inputs.", ""]
    return lines


# ---- Charts ------------------------------------------------------------------------

def chart_speedup(res, path, plt):
    """Grouped bars: one group per app, one bar (and colour) per size name."""
    def speedup(app, size):
        return ratio(res.device_ms(app, size, "sort"), res.device_ms(app, size, "auto"))

    apps = [a for a in res.apps if any(speedup(a, s) for s in res.sizes_of(a))]
    if not apps:
        return False
    # Within a group the sizes go smallest first; a size name keeps its colour
    # across groups (the presets are shared by the apps).
    names = []
    for app in apps:
        names += [s for s in res.sizes_of(app) if s not in names]
    cycle = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    colour = {name: cycle[i % len(cycle)] for i, name in enumerate(names)}
    width = 0.8 / max(len(res.sizes_of(a)) for a in apps)
    bars = sum(len(res.sizes_of(a)) for a in apps)
    fig, ax = plt.subplots(figsize=(min(20.0, max(6.0, 0.45 * bars + 2)), 4.5))
    values, labelled = [], set()
    for i, app in enumerate(apps):
        sizes = res.sizes_of(app)
        for k, size in enumerate(sizes):
            v = speedup(app, size)
            if v is None:
                continue
            x = i + width * (k - (len(sizes) - 1) / 2)
            label = None if size in labelled else size
            labelled.add(size)
            ax.bar([x], [v], width * 0.9, color=colour[size], label=label)
            ax.annotate(f"{v:.1f}x", (x, v), ha="center", va="bottom", fontsize=7)
            values.append(v)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylim(min(0.5, min(values) / 2), max(values) * 3)
    ax.set_xticks(range(len(apps)))
    ax.set_xticklabels(apps)
    ax.set_ylabel("speedup of auto over sort (device time)")
    ax.set_title(f"Soren auto over sort (Mars): {res.data.get('gpu', '')}, {res.data.get('date', '')}",
                 fontsize=10)
    ax.legend(title="size", fontsize=7, title_fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def chart_phases(res, path, plt):
    apps = [a for a in res.apps if res.get(a, res.largest(a), "auto")]
    if not apps:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(apps)), 4.5))
    bottoms = [0.0] * len(apps)
    for phase in DEVICE_PHASES:
        ys = [((res.get(a, res.largest(a), "auto").get("phases_ms") or {}).get(phase) or 0.0)
              for a in apps]
        if not any(ys):
            continue
        ax.bar(range(len(apps)), ys, 0.6, bottom=bottoms, label=phase)
        bottoms = [b + y for b, y in zip(bottoms, ys)]
    for i, total in enumerate(bottoms):
        ax.annotate(f"{total:.1f} ms", (i, total), ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(bottoms) * 1.15 or 1)
    ax.set_xticks(range(len(apps)))
    ax.set_xticklabels([f"{a}\n{res.largest(a)}" for a in apps], fontsize=8)
    ax.set_ylabel("device ms (median)")
    ax.set_title(f"Soren auto, device phases at the largest size: {res.data.get('gpu', '')}",
                 fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], fontsize=7)  # top of the stack first
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def load_pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


# ---- The report ----------------------------------------------------------------------

def write_report(results_path, outdir, plt="auto"):
    """Writes OUTDIR/STEM.md and the charts; returns the Markdown's path."""
    with open(results_path, encoding="utf-8") as f:
        data = json.load(f)
    res, real = Results(data), Results(data, "real")
    stem = os.path.splitext(os.path.basename(results_path))[0]
    os.makedirs(outdir, exist_ok=True)
    if plt == "auto":
        plt = load_pyplot()
    fig3, fig4 = f"{stem}-fig3-speedup.png", f"{stem}-fig4-phases.png"
    charts = []
    if plt is None:
        charts = ["Charts skipped: matplotlib is not installed where this report was made.", ""]
    else:
        if chart_speedup(res, os.path.join(outdir, fig3), plt):
            charts += [f"![auto over sort, per app and size]({fig3})", ""]
        if chart_phases(res, os.path.join(outdir, fig4), plt):
            charts += [f"![auto's device phases at the largest size]({fig4})", ""]

    lines = header(res, stem)
    lines += section_speedup(res)
    lines += section_phases(res)
    lines += charts
    lines += section_cpu(res) + section_cub(res) + section_limits(res) + section_targets(res)
    if real.rows or data.get("real_inputs"):
        lines += section_real(res, real) + section_sources(data)
    md = os.path.join(outdir, stem + ".md")
    with open(md, "w", encoding="utf-8") as f:
        f.write("\n".join(lines).rstrip() + "\n")
    return md


# ---- Self-test ---------------------------------------------------------------------------

def synthetic_results():
    """A small results file: wordcount at two sizes with every config, histogram
    without a sort run (its speedup must read n/a), one output that does not match;
    the generated rows have no "input" (as in files older than real inputs), and
    wordcount at 1GiB also ran on a real input, whose SOURCES lists 25 files, and
    pageviewcount's real input was skipped."""
    def row(app, size, nbytes, config, device, wall, variant=None, match=True, phases=None,
            real=False):
        extra = {"input": "real", "source": "text-1073741824"} if real else {}
        return {**extra, "app": app, "size": size, "input_bytes": nbytes, "config": config,
                "variant": variant or config, "runs": 3, "wall_ms": [wall, wall * 1.1, wall * 0.9],
                "device_ms": None if device is None else [device, device * 1.2, device * 0.8],
                "phases_ms": phases or {"upload": nbytes / 25e6, "split": 1.0, "monitor": 0.5,
                                        "map": device * 0.7 if device else 0, "merge": 0.4,
                                        "reduce": 0.0, "sort": 0.3, "download": 2.0},
                "bytes_read": nbytes, "output_matches": match,
                "command": f"soren-host run {app} --engine {config} in-{size}"}
    gib, mib = 1 << 30, 10 << 20
    results = []
    for size, n in (("soren-small", mib), ("1GiB", gib)):
        scale = n / gib
        results += [row("wordcount", size, n, "auto", 80 * scale, 540 * scale + 300, "hash"),
                    row("wordcount", size, n, "sort", 720 * scale, 1230 * scale + 300),
                    row("wordcount", size, n, "cpu", None, 3700 * scale + 10),
                    row("wordcount", size, n, "cub", 30 * scale, 400 * scale + 300,
                        phases={"tokenize": 3, "hash": 2, "sort": 20, "reduce": 2, "recover": 1,
                                "copy_back": 2})]
    results += [row("histogram", "1GiB", gib - 1, "auto", 8.8, 498, "dense"),
                row("histogram", "1GiB", gib - 1, "cub", 8.0, 450, match=False,
                    phases={"histogram": 7.9, "copy_back": 0.1})]
    # on the real text: auto 100 ms device, 800 ms wall; cpu 4000 ms (5x); cub 50 ms (0.5x)
    results += [row("wordcount", "1GiB", gib, "auto", 100, 800, "block", real=True),
                row("wordcount", "1GiB", gib, "cpu", None, 4000, real=True),
                row("wordcount", "1GiB", gib, "cub", 50, 700, real=True),
                {"app": "pageviewcount", "size": "1GiB", "input": "real",
                 "source": "weblog-1073741800", "skipped": "no web server access log"}]
    sources = ["# Inputs made by bench/real-inputs.sh on buildhost, 2000-01-01T00:00Z",
               "text: 25 files, 1048576 bytes (documentation, .gz unpacked)"]
    sources += [f"  41943 /usr/share/doc/p{i:02}/copyright" for i in range(25)]
    real_inputs = {"text-1073741824": {"kind": "text", "bytes": gib, "file": "/d/text",
                                       "command": "sh bench/real-inputs.sh --kinds text ...",
                                       "sources": sources},
                   "weblog-1073741800": {"kind": "weblog", "bytes": gib - 24,
                                         "skipped": "no web server access log"}}
    return {"gpu": "Synthetic GPU", "driver": "0.0", "date": "2000-01-01", "commit": "unknown",
            "host_cpus": 16, "real_inputs": real_inputs,
            "limits": {"d2d_gbps": 3000.0, "h2d_pinned_gbps": 50.0, "h2d_pageable_gbps": 7.5,
                       "d2h_pinned_gbps": 50.0, "command": "bench/bench-limits --json"},
            "results": results}


def self_test():
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "synthetic-2000-01-01.json")
        with open(src, "w", encoding="utf-8") as f:
            json.dump(synthetic_results(), f)
        plt = load_pyplot()
        md_path = write_report(src, os.path.join(tmp, "out"), plt)
        expect(md_path.endswith("synthetic-2000-01-01.md"), "the Markdown is named after the JSON")
        with open(md_path, encoding="utf-8") as f:
            md = f.read()
        for heading in ("# Soren benchmark: Synthetic GPU", "## (a)", "## (b)", "## (c)", "## (d)",
                        "## (e)", "## Targets"):
            expect(heading in md, f"section {heading!r}")
        # wordcount 1GiB: sort 720 / auto 80 = 9x (missed), cub 30 / auto 80 = 0.375x
        # (missed), 2^30 B / 80 ms = 13.4 GB/s (missed); histogram 8.0 / 8.8 = 0.91x (met);
        # cpu (3700 + 10) / (540 + 300) = 4.42x (missed).
        for text in ("| 9.00x |", "0.38x", "13.4 GB/s", "0.91x", "4.42x", "| met |", "**missed**",
                     "**NO**", "Outputs that did not match: histogram 1GiB cub", "`bench/bench-limits --json`",
                     "1500.0 GB/s"):
            expect(text in md, f"the report shows {text!r}")
        hist_a = [l for l in section_speedup_text(md).splitlines() if l.startswith("| histogram | 1GiB")]
        expect(len(hist_a) == 1 and hist_a[0].count(NA) >= 3, "histogram without sort reads n/a in (a)")
        targets_text = md.split("## Targets", 1)[-1].split("## (f)", 1)[0]
        expect(targets_text.count("| met |") == 1 and targets_text.count("**missed**") == 4,
               "one target met, four missed")
        # (f): generated and real side by side, each figure a column of each
        expect("| auto device ms, generated | auto device ms, real |" in md, "(f)'s columns")
        expect("| wordcount | 1GiB | 1 GiB | hash | block | 80.00 | 100.00 | 840.0 | 800.0 | "
               "3710.0 | 4000.0 | 4.42x | 5.00x | 0.38x | 0.50x |" in md,
               "(f) sets wordcount's real figures beside its generated ones")
        expect("| wordcount | soren-small" not in md.split("## (f)", 1)[-1],
               "(f) only where a real input ran")
        for text in ("- `text-1073741824`, 1 GiB (wordcount): `sh bench/real-inputs.sh",
                     "  # Inputs made by bench/real-inputs.sh on buildhost",
                     "    41943 /usr/share/doc/p19/copyright", "  ... and 5 more",
                     "- `weblog-1073741800` (pageviewcount): skipped: no web server access log"):
            expect(text in md, f"the sources section shows {text!r}")
        expect("p20/copyright" not in md, "the sources section cuts a long list")
        if plt is None:
            expect("Charts skipped" in md, "the report says the charts were skipped")
        else:
            for name in ("synthetic-2000-01-01-fig3-speedup.png", "synthetic-2000-01-01-fig4-phases.png"):
                p = os.path.join(tmp, "out", name)
                expect(os.path.exists(p) and os.path.getsize(p) > 1000, f"chart {name}")
                expect(name in md, f"the report links {name}")
        # An empty results file still gives a report, every figure n/a.
        empty = os.path.join(tmp, "empty.json")
        with open(empty, "w", encoding="utf-8") as f:
            json.dump({"gpu": "g", "results": []}, f)
        with open(write_report(empty, os.path.join(tmp, "out"), None), encoding="utf-8") as f:
            md = f.read()
        expect(md.split("## Targets", 1)[-1].count(NA) >= 5, "targets without runs read n/a")
        # A file from before real inputs (no "input", no real_inputs) has no (f).
        old = synthetic_results()
        old["results"] = [r for r in old["results"] if "input" not in r]
        del old["real_inputs"]
        with open(empty, "w", encoding="utf-8") as f:
            json.dump(old, f)
        with open(write_report(empty, os.path.join(tmp, "out"), None), encoding="utf-8") as f:
            md = f.read()
        expect("| 9.00x |" in md and "## (f)" not in md and "## Real inputs" not in md,
               "a file without real inputs: the generated sections alone")

    for f in failures:
        print(f"report.py self-test: FAILED: {f}", file=sys.stderr)
    print(f"report.py self-test: {'passed' if not failures else 'failed'}"
          f" (charts {'checked' if plt else 'skipped: no matplotlib'})")
    return 1 if failures else 0


def section_speedup_text(md):
    return md.split("## (a)", 1)[-1].split("## (b)", 1)[0]


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 3 or argv[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print("usage: report.py RESULTS.json OUTDIR | report.py --self-test", file=sys.stderr)
        return 2
    md = write_report(argv[1], argv[2])
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
