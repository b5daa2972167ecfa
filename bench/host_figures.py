#!/usr/bin/env python3
"""host_figures.py - what the resident host saves, as a user times it: whole
soren-host run processes with a host running and without, side by side in
one run.

    bench/host_figures.py BUNDLE WORKDIR [--big-gib N] [--big-word-length MEAN | --big-from FILE]
                          [--json OUT]

BUNDLE is a GPU bundle (make gpu-bundle) or a build tree: its soren-host,
soren-gen and bench/bench-limits are used.  Measured, each as the median of
its repetitions:

  small     a 1 MiB wordcount (generated text), 15 runs each way;
  big       an N GiB text (default 8) from the page cache, 5 runs each way
            (soren-gen's words, of mean length MEAN where given: short words
            keep the map ahead of the bus, long ones put it behind; or, with
            --big-from FILE, FILE's bytes repeated, e.g. the real text of
            bench/real-inputs.sh),
            against the pinned host-to-device bandwidth bench-limits measures
            in the same run (the fraction is that bandwidth's share the whole
            process reached: bytes / process seconds / pinned bytes a second);
  clients   1,000 jobs of 64 KiB from 8 clients at once through the host
            (jobs a second), and 200 from 8 clients without one.

Every output through the host is compared with the run without it.
"""
import argparse, json, os, statistics, subprocess, sys, time


def run(cmd, env):
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def median_time(cmd, env, reps):
    run(cmd, env)  # warm: the page cache, and the host's plugin and session
    return statistics.median(run(cmd, env) for _ in range(reps))


def output_of(cmd, env):
    return subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE).stdout


def clients(host_cmd, env, clients, per_client):
    procs = []
    t = time.perf_counter()
    loop = "for i in $(seq %d); do %s >/dev/null || exit 1; done" % (per_client, host_cmd)
    for _ in range(clients):
        procs.append(subprocess.Popen(["sh", "-c", loop], env=env))
    bad = sum(p.wait() != 0 for p in procs)
    if bad:
        sys.exit("host_figures: %d clients failed" % bad)
    return clients * per_client / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("work")
    ap.add_argument("--big-gib", type=int, default=8)
    ap.add_argument("--big-word-length")
    ap.add_argument("--big-from")
    ap.add_argument("--json")
    a = ap.parse_args()
    b = os.path.abspath(a.bundle)
    os.makedirs(a.work, exist_ok=True)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = b + "/lib:" + env.get("LD_LIBRARY_PATH", "")
    env["SOREN_PLUGIN_PATH"] = b + "/stage/plugins"
    sock = os.path.join(a.work, "host", "host.sock")
    env["SOREN_HOST"] = sock
    host = b + "/soren-host"
    gen = b + "/soren-gen"
    w = lambda name: os.path.join(a.work, name)

    subprocess.run([gen, "text", "--size", "1M", "--seed", "11", "-o", w("1m.txt")], check=True)
    subprocess.run([gen, "text", "--size", "64K", "--seed", "12", "-o", w("64k.txt")], check=True)
    if a.big_from:
        if a.big_word_length:
            sys.exit("host_figures: --big-from and --big-word-length do not go together")
        with open(a.big_from, "rb") as f:
            part = f.read()
        if not part:
            sys.exit("host_figures: %s is empty" % a.big_from)
    else:
        words = ["--word-length", a.big_word_length] if a.big_word_length else []
        subprocess.run([gen, "text", "--size", "1G", "--vocab", "400000", "--seed", "13"] +
                       words + ["-o", w("1g.txt")], check=True)
        with open(w("1g.txt"), "rb") as one:
            part = one.read()
    # FILE's bytes repeated and cut at N GiB (a cut line is the last one)
    left = a.big_gib << 30
    with open(w("big.txt"), "wb") as out:
        while left:
            piece = part[:left]
            out.write(piece)
            left -= len(piece)
    del part
    big_bytes = os.path.getsize(w("big.txt"))
    limits = json.loads(subprocess.run([b + "/bench/bench-limits", "--json"], env=env,
                                       check=True, stdout=subprocess.PIPE).stdout)
    pinned = limits["h2d_pinned_gbps"] * 1e9

    wc = lambda f, *extra: [host, "run", "wordcount", w(f), *extra]
    r = {"gpu": limits.get("gpu"), "pinned_h2d_gbps": limits["h2d_pinned_gbps"],
         "big_bytes": big_bytes,
         "big_text": ("%s repeated" % a.big_from if a.big_from else
                      "soren-gen text, word length %s" % (a.big_word_length or "default"))}
    # Without a host
    r["small_local_ms"] = 1e3 * median_time(wc("1m.txt", "--local"), env, 15)
    r["big_local_s"] = median_time(wc("big.txt", "--local", "-o", "/dev/null"), env, 5)
    want_small = output_of(wc("1m.txt", "--local"), env)
    want_big = output_of(wc("big.txt", "--local", "--top", "20"), env)
    r["clients_local_jobs_per_s"] = clients(
        "'%s' run --local wordcount '%s'" % (host, w("64k.txt")), env, 8, 25)
    # With one
    subprocess.run([host, "serve", "--detach", "--load", "wordcount"], env=env, check=True)
    try:
        r["small_host_ms"] = 1e3 * median_time(wc("1m.txt"), env, 15)
        r["big_host_s"] = median_time(wc("big.txt", "-o", "/dev/null"), env, 5)
        r["small_equal"] = output_of(wc("1m.txt"), env) == want_small
        r["big_equal"] = output_of(wc("big.txt", "--top", "20"), env) == want_big
        r["clients_host_jobs_per_s"] = clients(
            "'%s' run wordcount '%s'" % (host, w("64k.txt")), env, 8, 125)
        r["ps"] = subprocess.run([host, "ps"], env=env, stdout=subprocess.PIPE,
                                 text=True).stdout
    finally:
        subprocess.run([host, "stop"], env=env)
    for k in ("local", "host"):
        r["big_%s_fraction_of_pinned" % k] = big_bytes / r["big_%s_s" % k] / pinned
    print(json.dumps(r, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    if not (r["small_equal"] and r["big_equal"]):
        sys.exit("host_figures: outputs through the host differ from local runs")


if __name__ == "__main__":
    main()
