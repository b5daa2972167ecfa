#!/usr/bin/env python3
"""run_bench.py - `make bench`: every application at the papers' sizes and at a
size that fills the GPU, with auto, each GPU variant that applies, the CPU
engine and, for wordcount and histogram, the CUB baselines; the hardware limits
measured in the same run; one results file, its report and charts.  Each
application of text, RGB or web logs also runs on real input of the same size.

    run_bench.py [--out DIR] [--runs N] [--apps A,B,...] [--sizes S,...]
                 [--data DIR] [--configs C,...] [--inputs generated,real]
                 [--timeout SECONDS]

--out        where the results go (default: bench/results beside this script)
--runs       timed runs of each configuration after one warm-up (default 5)
--apps       the applications (default all: wordcount grep histogram stringmatch
             pageviewcount pageviewrank invertedindex matmul simscore kmeans)
--sizes      small, medium, big (the Soren paper's Table 2, or the Mars paper's
             Table 4 where the Soren paper has no data set of that kind) and gpu
             (1 GiB of input, or the largest index job of the table below)
--data       where generated inputs are kept between runs (default
             $SOREN_BENCH_DIR, else /tmp/soren-bench)
--configs    only these configurations (auto, a variant, cpu, cub)
--inputs     generated (soren-gen's), real (bench/real-inputs.sh's, from the
             host's documentation, pictures and access logs, for the jobs
             of text, RGB and web logs) or both (the default)

Run from the build tree (make bench sets SOREN_BENCH_ROOT to it) or from the GPU
bundle (gpu-bundle/bench/run_bench.py: the root is the folder above).  Each
configuration runs in its own process, bench/soren-bench, which times it
through libsoren's API: a warm-up, then the timed runs (wall clock around each
run; device phases from the run's --explain report, which the GPU engine times
with CUDA events).  Every configuration's output is compared with the CPU
engine's, byte for byte.  Writes DIR/<gpu>-<date>.json (every figure with its
exact command), then report.py writes DIR/<gpu>-<date>.md and its two charts.

A real input has the generated one's size in bytes (a web log: whole lines up
to it); bench/real-inputs.sh makes it once into the data folder, and the
results file keeps, once per input, the files it was made from (its SOURCES).
A kind the host lacks is recorded as skipped with the script's reason.  Where
bench/real-seed is beside this script (the GPU bundle carries one, made on the
build host), it is the seed for a kind the host lacks (REAL_INPUTS_SEED, unless
the environment sets it).
"""

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Each kind of input: what soren-gen makes for each size, and its label.
DATA = {
    "text": {"small": ("soren-small", ["text", "--preset", "soren-small"]),
             "medium": ("soren-medium", ["text", "--preset", "soren-medium"]),
             "big": ("soren-big", ["text", "--preset", "soren-big"]),
             "gpu": ("1GiB", ["text", "--size", "1G"])},
    "rgb": {"small": ("soren-small", ["rgb", "--preset", "soren-small"]),
            "medium": ("soren-medium", ["rgb", "--preset", "soren-medium"]),
            "big": ("soren-big", ["rgb", "--preset", "soren-big"]),
            "gpu": ("1GiB", ["rgb", "--size", "1G"])},
    "weblog": {"small": ("soren-small", ["weblog", "--preset", "soren-small"]),
               "medium": ("soren-medium", ["weblog", "--preset", "soren-medium"]),
               "big": ("soren-big", ["weblog", "--preset", "soren-big"]),
               "gpu": ("1GiB", ["weblog", "--size", "1G"])},
    "html": {"small": ("mars-small", ["html", "--preset", "mars-small"]),
             "medium": ("mars-medium", ["html", "--preset", "mars-medium"]),
             "big": ("mars-large", ["html", "--preset", "mars-large"]),
             "gpu": ("1GiB", ["html", "--size", "1G"])},
    # square matrices of n x n float32 (matmul reads two)
    "matrix": {"small": ("soren-small", 500), "medium": ("soren-medium", 1000),
               "big": ("soren-big", 2000), "gpu": ("4096", 4096)},
    # documents of 128 float32 term weights
    "features": {"small": ("mars-small", 512), "medium": ("mars-medium", 1024),
                 "big": ("mars-large", 2048), "gpu": ("4096", 4096)},
    # 3-D float32 points (12 bytes each); the gpu size is 1 GiB of them
    "points": {"small": ("100K", 100000), "medium": ("1M", 1000000),
               "big": ("10M", 10000000), "gpu": ("1GiB", (1 << 30) // 12)},
}

COMBINE = ["auto", "hash", "block", "direct", "sort", "cpu"]
MAP_ONLY = ["auto", "direct", "sort", "cpu"]
APPS = {
    "wordcount": {"data": "text", "configs": COMBINE + ["cub"]},
    "grep": {"data": "text", "configs": COMBINE, "params": ["pattern=^qu.?$"]},
    "histogram": {"data": "rgb", "configs": ["auto", "dense", "hash", "block", "direct", "sort",
                                             "cpu", "cub"]},
    "stringmatch": {"data": "text", "configs": MAP_ONLY, "params": ["pattern=thing"]},
    "pageviewcount": {"data": "weblog", "configs": COMBINE},
    "pageviewrank": {"data": "weblog", "configs": MAP_ONLY},
    "invertedindex": {"data": "html", "configs": MAP_ONLY},
    "matmul": {"data": "matrix", "configs": MAP_ONLY},
    "simscore": {"data": "features", "configs": MAP_ONLY},
    "kmeans": {"data": "points", "configs": COMBINE},
}
SIZES = ["small", "medium", "big", "gpu"]
CUB = {"wordcount": "cub-wordcount", "histogram": "cub-histogram"}
INPUTS = ["generated", "real"]
# The kinds of input bench/real-inputs.sh makes from a host's real files.
REAL_KINDS = ("text", "rgb", "weblog")


def log(*args):
    print(*args, flush=True)


class Skipped(Exception):
    """A real input the host cannot make: its key in real_inputs, and why."""

    def __init__(self, key, reason):
        super().__init__(reason)
        self.key = key


class Bench:
    def __init__(self, args):
        self.args = args
        self.root = os.environ.get("SOREN_BENCH_ROOT") or os.path.dirname(HERE)
        self.bundle = os.path.isdir(os.path.join(self.root, "lib"))
        self.env = dict(os.environ)
        self.env["SOREN_PLUGIN_PATH"] = os.path.join(self.root, "stage", "plugins")
        if self.bundle:
            lib = os.path.join(self.root, "lib")
            self.env["LD_LIBRARY_PATH"] = lib + (":" + os.environ["LD_LIBRARY_PATH"]
                                                 if os.environ.get("LD_LIBRARY_PATH") else "")
        self.host = os.path.join(self.root, "soren-host")
        self.gen = os.path.join(self.root, "soren-gen")
        self.bench = os.path.join(self.root, "bench", "soren-bench")
        seed = os.path.join(HERE, "real-seed")
        if os.path.isdir(seed) and "REAL_INPUTS_SEED" not in self.env:
            self.env["REAL_INPUTS_SEED"] = seed
        self.data = args.data
        os.makedirs(self.data, exist_ok=True)
        self.results = []
        # KIND-BYTES -> the real input made (its file and SOURCES) or skipped
        self.real_inputs = {}

    def run(self, cmd, timeout=None, **kw):
        """Runs cmd; returns its standard output, or raises with its standard error."""
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                              timeout=timeout or self.args.timeout, **kw)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)}: exit {done.returncode}: "
                               f"{done.stderr.strip()[-2000:]}")
        return done.stdout

    # ---- Inputs ---------------------------------------------------------------

    def generate(self, name, gen_args):
        path = os.path.join(self.data, name)
        if not os.path.exists(path):
            self.run([self.gen] + gen_args + ["-o", path + ".tmp"], timeout=1800)
            os.rename(path + ".tmp", path)
        return path

    def real(self, kind, nbytes):
        """The real input of kind of nbytes: (its key in the results' real_inputs,
        its path), made by bench/real-inputs.sh into DATA/real-KEY once; raises
        Skipped where the host lacks the kind, RuntimeError where the script fails."""
        key = f"{kind}-{nbytes}"
        known = self.real_inputs.get(key)
        if known:
            if "skipped" in known:
                raise Skipped(key, known["skipped"])
            return key, known["file"]
        folder = os.path.join(self.data, f"real-{key}")
        path = os.path.join(folder, key)
        cmd = ["sh", os.path.join(HERE, "real-inputs.sh"), "--kinds", kind, folder, str(nbytes)]
        if not (os.path.exists(path) and os.path.exists(os.path.join(folder, "SOURCES"))):
            # made in a folder of its own, renamed when whole
            tmp = folder + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            done = subprocess.run(cmd[:-2] + [tmp, str(nbytes)], env=self.env,
                                  capture_output=True, text=True, timeout=1800)
            if done.returncode == 3:
                why = re.search(r"skipped: (.*)", done.stderr)
                reason = why.group(1) if why else done.stderr.strip()[-500:]
                self.real_inputs[key] = {"kind": kind, "bytes": nbytes, "command": shlex.join(cmd),
                                         "skipped": reason}
                shutil.rmtree(tmp, ignore_errors=True)
                raise Skipped(key, reason)
            if done.returncode != 0:
                raise RuntimeError(f"{shlex.join(cmd)}: exit {done.returncode}: "
                                   f"{done.stderr.strip()[-2000:]}")
            shutil.rmtree(folder, ignore_errors=True)
            os.rename(tmp, folder)
        with open(os.path.join(folder, "SOURCES"), encoding="utf-8", errors="replace") as f:
            sources = [line.rstrip("\n") for line in f if line.strip()]
        self.real_inputs[key] = {"kind": kind, "bytes": os.path.getsize(path), "file": path,
                                 "command": shlex.join(cmd), "sources": sources}
        return key, path

    def inputs(self, app, size, which="generated"):
        """(label, input files, extra soren-bench arguments, input bytes, bytes read,
        source): which is generated or real; source is the real input's key."""
        kind = APPS[app]["data"]
        label, spec = DATA[kind][size]
        if kind in ("text", "rgb", "weblog", "html"):
            # the generated input, also made for its size where the real one is asked for
            path = self.generate(f"{kind}-{label}", spec + ["--seed", "1"])
            views = os.path.join(self.data, f"views-{label}.tsv")
            source = None
            if which == "real":
                source, path = self.real(kind, os.path.getsize(path))
                views = os.path.join(os.path.dirname(path), "views.tsv")
            files = [path]
            if app == "pageviewrank":
                # its input is pageviewcount's output over the same log
                if not os.path.exists(views):
                    self.run([self.host, "run", "pageviewcount", path, "--device", "cpu",
                              "-o", views], timeout=1800)
                files = [views]
            size_bytes = os.path.getsize(files[0])
            return label, files, [], size_bytes, size_bytes, source
        if kind == "matrix":
            n = spec
            a = self.generate(f"matrix-{n}-a", ["matrix", "--rows", str(n), "--cols", str(n),
                                                "--seed", "1"])
            b = self.generate(f"matrix-{n}-b", ["matrix", "--rows", str(n), "--cols", str(n),
                                                "--seed", "2"])
            extra = ["--param", f"a=@{a}", "--param", f"b=@{b}", "--param", f"rows={n}",
                     "--param", f"inner={n}", "--param", f"cols={n}"]
            return label, [], extra, 0, 2 * n * n * 4, None
        if kind == "features":
            docs = spec
            f = self.generate(f"features-{docs}", ["features", "--docs", str(docs), "--dims",
                                                   "128", "--seed", "1"])
            extra = ["--param", f"features=@{f}", "--param", f"docs={docs}",
                     "--param", "dims=128"]
            return label, [], extra, 0, docs * 128 * 4, None
        count = spec
        points = self.generate(f"points-{label}", ["points", "--count", str(count), "--dims",
                                                   "3", "--clusters", "24", "--seed", "1"])
        c0 = self.generate(f"points-{label}-c0", ["points", "--dims", "3", "--centroids",
                                                  "24", "--clusters", "24", "--seed", "1"])
        extra = ["--param", "k=24", "--param", f"centroids=@{c0}"]
        size_bytes = os.path.getsize(points)
        return label, [points], extra, size_bytes, size_bytes, None

    # ---- Configurations -------------------------------------------------------

    def config_command(self, app, config, files, extra, output):
        params = []
        for p in APPS[app].get("params", []):
            params += ["--param", p]
        cmd = [self.bench, app, "--runs", str(self.args.runs), "--output", output]
        if config == "cpu":
            cmd += ["--device", "cpu"]
        else:
            cmd += ["--device", "gpu", "--engine", config]
        return cmd + params + extra + files

    def one(self, app, config, label, which, source, files, extra, input_bytes, bytes_read,
            reference):
        tag = label if which == "generated" else f"{label}-real"
        output = os.path.join(self.data, f"out-{app}-{tag}-{config}")
        if config == "cub":
            cmd = [os.path.join(self.root, "bench", CUB[app]), files[0], output,
                   "--runs", str(self.args.runs)]
        else:
            cmd = self.config_command(app, config, files, extra, output)
        row = {"app": app, "size": label, "input": which, "input_bytes": input_bytes or bytes_read,
               "config": config, "bytes_read": bytes_read, "command": shlex.join(cmd)}
        if source:
            row["source"] = source
        t0 = time.time()
        try:
            line = self.run(cmd).strip().splitlines()[-1]
            got = json.loads(line)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
            row["error"] = str(e)[-1000:]
            log(f"  {app:14} {tag:18} {config:7} FAILED: {row['error'][:300]}")
            # a run killed by the time limit may leave part of its output;
            # the CPU engine's must not be taken for the reference
            try:
                os.remove(output)
            except OSError:
                pass
            return row
        if config == "cub":
            row.update(variant="cub", runs=len(got["runs_ms"]), wall_ms=None,
                       device_ms=got["runs_ms"], phases_ms=got["phases_ms"])
        else:
            row.update(variant=got["variant"], runs=got["runs"], wall_ms=got["wall_ms"],
                       device_ms=got["device_ms"], phases_ms=got["phases_ms"],
                       pairs=got["pairs"], device=got["device"])
        if reference and config != "cpu":
            row["output_matches"] = files_equal(reference, output)
        elif config == "cpu":
            row["output_matches"] = None
        wall = median(row.get("wall_ms"))
        dev = median(row.get("device_ms"))
        checked = {True: "=", False: "DIFFERS", None: "ref" if config == "cpu" else "unchecked"}
        log(f"  {app:14} {tag:18} {config:7} ran {row['variant']:6} "
            f"wall {fmt(wall)} ms, device {fmt(dev)} ms, "
            f"output {checked[row.get('output_matches')]}"
            f"  ({time.time() - t0:.0f} s)")
        if config != "cpu":
            try:
                os.remove(output)
            except OSError:
                pass
        return row

    def app(self, app):
        for size in self.args.sizes:
            for which in self.args.inputs:
                if which == "real" and APPS[app]["data"] not in REAL_KINDS:
                    continue
                self.app_input(app, size, which)

    def app_input(self, app, size, which):
        """Every configuration of app at size on the generated or the real input."""
        try:
            label, files, extra, input_bytes, bytes_read, source = self.inputs(app, size, which)
        except Skipped as e:
            log(f"  {app}: {size}: real input skipped: {e}")
            self.results.append({"app": app, "size": DATA[APPS[app]["data"]][size][0],
                                 "input": which, "source": e.key, "skipped": str(e)})
            return
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log(f"  {app}: {size}: cannot make the {which} input: {e}")
            return
        tag = label if which == "generated" else f"{label}-real"
        reference = os.path.join(self.data, f"out-{app}-{tag}-cpu")
        configs = [c for c in APPS[app]["configs"]
                   if not self.args.configs or c in self.args.configs]
        # the CPU engine first: its output is every other's reference
        order = [c for c in configs if c == "cpu"] + [c for c in configs if c != "cpu"]
        for config in order:
            row = self.one(app, config, label, which, source, files, extra, input_bytes,
                           bytes_read, reference if os.path.exists(reference) else None)
            self.results.append(row)
        try:
            os.remove(reference)
        except OSError:
            pass

    # ---- The run ----------------------------------------------------------------

    def limits(self):
        cmd = [os.path.join(self.root, "bench", "bench-limits"), "--json"]
        try:
            got = json.loads(self.run(cmd).strip().splitlines()[-1])
        except (RuntimeError, OSError, ValueError, IndexError) as e:
            log(f"bench-limits failed: {e}")
            return {"command": shlex.join(cmd), "error": str(e)[-500:]}, "unknown GPU"
        got["command"] = shlex.join(cmd)
        return got, got.get("gpu", "unknown GPU")

    def save(self, started, limits, gpu):
        """Writes every result so far to OUT/<gpu>-<date>.json; returns its path."""
        date = datetime.date.today().isoformat()
        doc = {"gpu": gpu, "driver": driver_version(), "date": date, "commit": commit(self.root),
               "host_cpus": os.cpu_count(), "runs": self.args.runs,
               "seconds": round(time.time() - started), "limits": limits,
               "inputs": self.args.inputs, "real_inputs": self.real_inputs,
               "results": self.results}
        os.makedirs(self.args.out, exist_ok=True)
        path = os.path.join(self.args.out, f"{slug(gpu)}-{date}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)
        return path

    def main(self):
        started = time.time()
        limits, gpu = self.limits()
        log(f"{gpu}: d2d {limits.get('d2d_gbps')} GB/s, h2d pinned {limits.get('h2d_pinned_gbps')}"
            f" GB/s, pageable {limits.get('h2d_pageable_gbps')} GB/s")
        # the results file is rewritten after each job, so that a run cut
        # short (a device's time limit) keeps every figure it finished
        path = self.save(started, limits, gpu)
        for app in self.args.apps:
            log(f"{app}:")
            self.app(app)
            path = self.save(started, limits, gpu)
        log(f"wrote {path} ({len(self.results)} configurations, "
            f"{round(time.time() - started)} s)")
        report = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), path,
                                 self.args.out], text=True)
        failed = [r for r in self.results if "error" in r or r.get("output_matches") is False]
        for r in failed:
            log(f"FAILED: {r['app']} {r['size']} {r['input']} {r['config']}: "
                f"{r.get('error', 'output differs from the CPU engine')[:300]}")
        return 1 if failed or report.returncode != 0 else 0


def files_equal(a, b):
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                x, y = fa.read(1 << 20), fb.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


def median(values):
    nums = sorted(v for v in values or [] if isinstance(v, (int, float)))
    if not nums:
        return None
    n = len(nums)
    return nums[n // 2] if n % 2 else (nums[n // 2 - 1] + nums[n // 2]) / 2


def fmt(x):
    return "n/a" if x is None else f"{x:.2f}"


def slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def driver_version():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip().split("\n")[0]
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def commit(root):
    """The commit the programs were built from: the bundle's COMMIT file, else git."""
    try:
        with open(os.path.join(root, "COMMIT")) as f:
            return f.read().strip()
    except OSError:
        pass
    try:
        return subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=30).stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--apps", default=",".join(APPS))
    ap.add_argument("--sizes", default=",".join(SIZES))
    ap.add_argument("--data", default=os.environ.get("SOREN_BENCH_DIR", "/tmp/soren-bench"))
    ap.add_argument("--configs", default="",
                    help="only these configurations (e.g. cpu,auto; default: all that apply)")
    ap.add_argument("--inputs", default=",".join(INPUTS),
                    help="generated, real or both (the default)")
    ap.add_argument("--timeout", type=int, default=900,
                    help="seconds one configuration may take (default 900)")
    args = ap.parse_args(argv)
    args.apps = [a for a in args.apps.split(",") if a]
    args.sizes = [s for s in args.sizes.split(",") if s]
    args.configs = [c for c in args.configs.split(",") if c]
    for a in args.apps:
        if a not in APPS:
            ap.error(f"--apps: no application {a} (known: {', '.join(APPS)})")
    for s in args.sizes:
        if s not in SIZES:
            ap.error(f"--sizes: no size {s} (known: {', '.join(SIZES)})")
    inputs = [i for i in args.inputs.split(",") if i]
    for i in inputs:
        if i not in INPUTS:
            ap.error(f"--inputs: no input {i} (known: {', '.join(INPUTS)})")
    # the generated input first, each as often as once
    args.inputs = [i for i in INPUTS if i in inputs]
    if not args.inputs:
        ap.error(f"--inputs: expected {', '.join(INPUTS)} or both")
    if args.runs < 5:
        log("note: fewer than 5 runs per configuration: figures for a smoke run only")
    return args


if __name__ == "__main__":
    sys.exit(Bench(parse_args(sys.argv[1:])).main())
