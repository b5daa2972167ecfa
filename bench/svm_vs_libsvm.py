#!/usr/bin/env python3
"""svm_vs_libsvm.py - soren-svm against LibSVM on the SVM paper's datasets' shapes.

    svm_vs_libsvm.py [--out DIR] [--presets adult,web,usps,face,mnist]
                     [--rows PRESET=N ...] [--device gpu|cpu|auto] [--data DIR] [--host]
                     [--libsvm-models DIR]

For each preset of `soren-gen svm` (Adult 32,561 x 123 sparse binary, Web 49,749
x 300, USPS 7,291 x 256, Face 6,977 x 381, MNIST 60,000 x 784: the shapes of the
MapReduce code-generation paper's Table 2, with its C and gamma), trains with
svm-train and soren-svm and classifies the preset's test set with svm-predict and
soren-svm predict, each tool on its own model, on the same host: LibSVM on one CPU
core (as it runs), soren-svm on the GPU.  Records the number of support vectors,
the test accuracy, the times and their ratios, with every command, in
DIR/svm-<gpu>-<date>.json and a Markdown table beside it.  MNIST defaults to a
subset of 20,000 rows (LibSVM would take over 10 minutes on all 60,000);
--rows mnist=60000 runs it whole.

soren-svm runs its jobs in its own process (--local), or with --host in a
resident host that the script starts on a socket of its own with svmstep and
svmclassify loaded (soren-host serve --detach --load ...), as a user who keeps
one running has it; the record says which (DIR/svm-<gpu>-<date>-host.json).

--libsvm-models DIR takes LibSVM's models from DIR (TAG.libsvm.model, TAG the
preset, or PRESET-ROWS for a subset) instead of training them here: svm-train is
deterministic, so a model made on another host with the same settings is the
model it would make here, and adult's and web's take it minutes.  Only
classification is then compared for those sets; their training speedups are
left out.

Run from the build tree (SOREN_BENCH_ROOT) or from the GPU bundle (which carries
svm-train and svm-predict where they were installed when it was made).
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
PRESETS = ["adult", "web", "usps", "face", "mnist"]
DEFAULT_ROWS = {"mnist": 20000}


def log(*args):
    print(*args, flush=True)


class Runner:
    def __init__(self, args):
        self.args = args
        self.root = os.environ.get("SOREN_BENCH_ROOT") or os.path.dirname(HERE)
        self.env = dict(os.environ)
        self.env["SOREN_PLUGIN_PATH"] = os.path.join(self.root, "stage", "plugins")
        lib = os.path.join(self.root, "lib")
        if os.path.isdir(lib):
            self.env["LD_LIBRARY_PATH"] = lib + (":" + os.environ["LD_LIBRARY_PATH"]
                                                 if os.environ.get("LD_LIBRARY_PATH") else "")
        self.gen = os.path.join(self.root, "soren-gen")
        self.svm = os.path.join(self.root, "soren-svm")
        self.host = os.path.join(self.root, "soren-host")
        # in the host (SOREN_HOST names it once started), or here
        self.where = [] if args.host else ["--local"]
        # LibSVM's tools: the bundle's, else the PATH's
        carried = os.path.join(self.root, "bench", "libsvm")
        self.train = self.tool(carried, "svm-train")
        self.predict = self.tool(carried, "svm-predict")
        os.makedirs(args.data, exist_ok=True)

    def tool(self, carried, name):
        path = os.path.join(carried, name)
        if os.access(path, os.X_OK):
            return path
        found = shutil.which(name)
        if not found:
            sys.exit(f"svm_vs_libsvm.py: {name} not found: install libsvm-tools (Debian, Ubuntu) "
                     f"or make the GPU bundle where it is installed")
        return found

    def start_host(self):
        """A resident host on a socket of the bench's own, the jobs loaded."""
        sock = os.path.join(self.args.data, "host", "host.sock")
        self.env["SOREN_HOST"] = sock
        subprocess.run([self.host, "serve", "--detach", "--load", "svmstep", "--load",
                        "svmclassify"], env=self.env, check=True, capture_output=True)

    def stop_host(self):
        subprocess.run([self.host, "stop"], env=self.env, capture_output=True)

    def timed(self, cmd):
        t0 = time.time()
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                              timeout=self.args.timeout)
        seconds = time.time() - t0
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)}: exit {done.returncode}: "
                               f"{done.stderr.strip()[-1500:]}")
        return done.stdout + done.stderr, seconds

    def preset(self, name, rows):
        d = self.args.data
        rows_arg = ["--rows", str(rows)] if rows else []
        tag = f"{name}-{rows}" if rows else name
        train = os.path.join(d, f"{tag}.train")
        test = os.path.join(d, f"{tag}.test")
        for path, extra in ((train, []), (test, ["--test"])):
            if not os.path.exists(path):
                subprocess.run([self.gen, "svm", "--preset", name, "--seed", "1"] + rows_arg +
                               extra + ["-o", path], env=self.env, check=True)
        c, gamma = subprocess.run([self.gen, "svm", "--preset", name, "--print-params"],
                                  env=self.env, capture_output=True, text=True,
                                  check=True).stdout.split()[:2]
        row = {"preset": name, "rows": count_lines(train), "test_rows": count_lines(test),
               "c": float(c), "gamma": float(gamma)}
        theirs_model = os.path.join(d, f"{tag}.libsvm.model")
        ours_model = os.path.join(d, f"{tag}.soren.model")
        made = (os.path.join(self.args.libsvm_models, f"{tag}.libsvm.model")
                if self.args.libsvm_models else None)
        if made:
            if not os.path.exists(made):
                raise RuntimeError(f"--libsvm-models: no {made}")
            shutil.copyfile(made, theirs_model)
        # LibSVM's cache of 1000 MB: the paper gave it 650 MB, more than its GPU had
        cmds = {
            "libsvm_train": [self.train, "-c", c, "-g", gamma, "-e", "0.001", "-m", "1000",
                             train, theirs_model],
            "soren_train": [self.svm, "train", "--device", self.args.device, "-v"] +
                           self.where + ["-c", c, "-g", gamma, "-e", "0.001", train, ours_model],
            "libsvm_predict": [self.predict, test, theirs_model, os.path.join(d, "p.libsvm")],
            "soren_predict": [self.svm, "predict", "--device", self.args.device, "-v"] +
                             self.where + [test, ours_model, os.path.join(d, "p.soren")],
        }
        if made:
            del cmds["libsvm_train"]
            row["libsvm_model_made_beforehand"] = made
            row["libsvm_nsv"] = total_sv(theirs_model)
            row["libsvm_iterations"] = None
        row["commands"] = {k: shlex.join(v) for k, v in cmds.items()}
        for key, cmd in cmds.items():
            out, seconds = self.timed(cmd)
            row[key + "_s"] = round(seconds, 3)
            if key.endswith("train"):
                model = theirs_model if key.startswith("libsvm") else ours_model
                row[key.split("_")[0] + "_nsv"] = total_sv(model)
                m = re.search(r"#iter = (\d+)", out)
                row[key.split("_")[0] + "_iterations"] = int(m.group(1)) if m else None
            else:
                m = re.search(r"Accuracy = ([0-9.]+)%", out)
                row[key.split("_")[0] + "_accuracy"] = float(m.group(1)) if m else None
            # soren-svm -v: the training loop alone (no start-up, no files)
            m = re.search(r"(\d+) steps in ([0-9.]+) s", out)
            if key == "soren_train" and m:
                row["soren_train_loop_s"] = float(m.group(2))
                row["soren_step_us"] = round(1e6 * float(m.group(2)) / max(int(m.group(1)), 1), 2)
            m = re.search(r"read in ([0-9.]+) s", out)
            if key.startswith("soren") and m:
                row[key + "_read_s"] = float(m.group(1))
            m = re.search(r"classified in ([0-9.]+) s", out)
            if key == "soren_predict" and m:
                row["soren_predict_run_s"] = float(m.group(1))
            log(f"  {name}: {key}: {seconds:.2f} s")
        row["nsv_gap_percent"] = round(100 * abs(row["soren_nsv"] - row["libsvm_nsv"]) /
                                       max(row["libsvm_nsv"], 1), 3)
        row["accuracy_gap_points"] = round(abs(row["soren_accuracy"] - row["libsvm_accuracy"]), 3)
        if not made:
            row["train_speedup"] = round(row["libsvm_train_s"] / row["soren_train_s"], 3)
        row["predict_speedup"] = round(row["libsvm_predict_s"] / row["soren_predict_s"], 3)
        if row.get("soren_train_loop_s") and not made:
            row["train_loop_speedup"] = round(row["libsvm_train_s"] / row["soren_train_loop_s"], 3)
        if row.get("soren_predict_run_s"):
            row["predict_run_speedup"] = round(row["libsvm_predict_s"] / row["soren_predict_run_s"],
                                               3)
        return row


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def total_sv(model):
    with open(model) as f:
        for line in f:
            if line.startswith("total_sv"):
                return int(line.split()[1])
    return None


def gpu_name():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip().split("\n")[0] or "unknown GPU"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown GPU"


def markdown(doc):
    lines = [f"# soren-svm against LibSVM: {doc['gpu']}, {doc['date']}", "",
             f"commit {doc['commit']}; LibSVM on one core of the same host ({doc['host_cpus']} "
             f"CPUs), soren-svm on `--device {doc['device']}`, its jobs {doc['where']}.  "
             "Times are wall seconds of each "
             "program, file reading and writing included.  Raw figures and commands: "
             f"`{doc['stem']}.json`.", "",
             "| dataset | rows | test rows | C | gamma | nSV LibSVM | nSV Soren | gap | "
             "accuracy LibSVM | accuracy Soren | gap | train LibSVM s | train Soren s | "
             "speedup | predict LibSVM s | predict Soren s | speedup |",
             "|---" * 17 + "|"]
    for r in doc["results"]:
        if "error" in r:
            lines.append(f"| {r['preset']} | failed: {r['error'][:200]} |")
            continue
        lines.append(
            f"| {r['preset']} | {r['rows']} | {r['test_rows']} | {r['c']:g} | {r['gamma']:g} | "
            f"{r['libsvm_nsv']} | {r['soren_nsv']} | {r['nsv_gap_percent']:.2f}% | "
            f"{r['libsvm_accuracy']:.2f}% | {r['soren_accuracy']:.2f}% | "
            f"{r['accuracy_gap_points']:.2f} | {seconds(r.get('libsvm_train_s'))} | "
            f"{r['soren_train_s']:.2f} | {ratio(r.get('train_speedup'))} | "
            f"{r['libsvm_predict_s']:.2f} | "
            f"{r['soren_predict_s']:.2f} | {r['predict_speedup']:.2f}x |")
    lines += ["", "Soren's training loop and classification run alone (soren-svm -v: no process "
              "start-up, no file reading), against LibSVM's whole programs:", "",
              "| dataset | steps LibSVM | steps Soren | Soren a step, us | train loop s | speedup | "
              "classification run s | speedup | files read s, train / predict |", "|---" * 9 + "|"]
    for r in doc["results"]:
        if "error" in r or "soren_train_loop_s" not in r:
            continue
        lines.append(
            f"| {r['preset']} | {r['libsvm_iterations'] or 'n/a'} | {r['soren_iterations']} | "
            f"{r['soren_step_us']:.1f} | {r['soren_train_loop_s']:.3f} | "
            f"{ratio(r.get('train_loop_speedup'), 1)} | {r.get('soren_predict_run_s', 0):.3f} | "
            f"{r.get('predict_run_speedup', 0):.1f}x | {seconds(r.get('soren_train_read_s'), 3)} / "
            f"{seconds(r.get('soren_predict_read_s'), 3)} |")
    lines += ["", "The checks: the number of support vectors within 1% of LibSVM's, the test "
              "accuracy within 0.5 points."]
    made = [r["preset"] for r in doc["results"] if r.get("libsvm_model_made_beforehand")]
    if made:
        lines += ["", f"LibSVM's models of {', '.join(made)} were made beforehand with the same "
                  "svm-train and settings (--libsvm-models): n/a marks what its training would "
                  "have been timed for."]
    return "\n".join(lines) + "\n"


def seconds(v, places=2):
    return "n/a" if v is None else f"{v:.{places}f}"


def ratio(v, places=2):
    return "n/a" if v is None else f"{v:.{places}f}x"


def commit(root):
    try:
        with open(os.path.join(root, "COMMIT")) as f:
            return f.read().strip()
    except OSError:
        pass
    out = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--rows", action="append", default=[],
                    help="PRESET=N: train on N rows of the preset (a subset)")
    ap.add_argument("--device", default="gpu", choices=["gpu", "cpu", "auto"])
    ap.add_argument("--data", default=os.environ.get("SOREN_BENCH_DIR", "/tmp/soren-svm-bench"))
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--host", action="store_true",
                    help="run soren-svm's jobs in a resident host the script starts")
    ap.add_argument("--libsvm-models", metavar="DIR",
                    help="LibSVM's models made beforehand (TAG.libsvm.model): classification only")
    args = ap.parse_args(argv)
    rows = dict(DEFAULT_ROWS)
    for r in args.rows:
        name, _, n = r.partition("=")
        if name not in PRESETS or not n.isdigit():
            ap.error(f"--rows {r}: expected PRESET=N with PRESET one of {', '.join(PRESETS)}")
        rows[name] = int(n)
    runner = Runner(args)
    gpu = gpu_name()
    date = datetime.date.today().isoformat()
    stem = f"svm-{re.sub(r'[^a-z0-9]+', '-', gpu.lower()).strip('-')}-{date}"
    stem += "-host" if args.host else ""
    doc = {"gpu": gpu, "date": date, "commit": commit(runner.root), "host_cpus": os.cpu_count(),
           "device": args.device,
           "where": "in a resident host (soren-host serve)" if args.host else "in its process",
           "stem": stem, "results": []}
    if args.host:
        runner.start_host()
    for name in [p for p in args.presets.split(",") if p]:
        if name not in PRESETS:
            ap.error(f"--presets: no preset {name}")
        log(f"{name}:")
        try:
            doc["results"].append(runner.preset(name, rows.get(name)))
        except (RuntimeError, subprocess.SubprocessError) as e:
            log(f"  {name}: failed: {e}")
            doc["results"].append({"preset": name, "error": str(e)[-1000:]})
    if args.host:
        runner.stop_host()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, stem + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    text = markdown(doc)
    with open(os.path.join(args.out, stem + ".md"), "w") as f:
        f.write(text)
    print(text)
    return 1 if any("error" in r for r in doc["results"]) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
