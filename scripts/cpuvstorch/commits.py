"""vdpp's network calls at several builds, side by side in one run: each build's
scripts/cpuvstorch helper loads the same case folder (the network, its weights and inputs,
written once by compare.py's case code, PyTorch's output with them), then the helpers take
turns, a round of K calls each, the order rotated every round so that no build always runs
first and all of them see the same machine load. Run through scripts/cpu-vs-commits.sh,
which builds the helper at each commit.

For each case the summary gives every build's median and fastest call (wall and process
CPU time, user + system over all threads) and each build's ratio to the first build's
(below 1: faster than the first), plus the 1-minute load average before and after. On a
loaded machine the CPU time is the steadier measure: wall time then includes the time the
threads wait for a core.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402


def run_case(name, d, go_args, builds, threads, rounds, calls):
    env = dict(os.environ, GOMAXPROCS=str(threads))
    procs, res = {}, {}
    for tag, binary in builds:
        p = subprocess.Popen([binary] + go_args + ["-dir", d], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env)
        procs[tag] = p
        res[tag] = {"ms": [], "cpu_ms": [], "ready": json.loads(p.stdout.readline())}
    tags = [t for t, _ in builds]
    load0 = os.getloadavg()[0]
    for r in range(rounds):
        for i in range(len(tags)):
            tag = tags[(i + r) % len(tags)]
            procs[tag].stdin.write(f"run {calls}\n")
            procs[tag].stdin.flush()
            got = json.loads(procs[tag].stdout.readline())
            res[tag]["ms"] += got["ms"]
            res[tag]["cpu_ms"] += got["cpu_ms"]
    load1 = os.getloadavg()[0]
    for p in procs.values():
        p.stdin.write("quit\n")
        p.stdin.close()
        p.wait()
    out = {"case": name, "load_avg_1min": [round(load0, 2), round(load1, 2)], "builds": []}
    for tag in tags:
        ms, cpu = res[tag]["ms"], res[tag]["cpu_ms"]
        out["builds"].append({"build": tag, "median_ms": statistics.median(ms), "min_ms": min(ms),
                              "median_cpu_ms": statistics.median(cpu), "min_cpu_ms": min(cpu),
                              "rel_l2_vs_torch": res[tag]["ready"]["rel_l2_vs_torch"],
                              "kernels": res[tag]["ready"]["kernels"],
                              "ms": [round(x, 2) for x in ms], "cpu_ms": [round(x, 2) for x in cpu]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", action="append", required=True, metavar="NAME=HELPER",
                    help="a build's name and its scripts/cpuvstorch binary (repeat; the first is the reference)")
    ap.add_argument("--cases", default="a,c", help="letters or names of compare.py's network cases, comma-separated")
    ap.add_argument("--threads", type=int, default=2, help="threads of each build")
    ap.add_argument("--rounds", type=int, default=6, help="rounds; each build makes --calls calls per round")
    ap.add_argument("--calls", type=int, default=3, help="calls of each build per round")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", default="", help="also write the results here")
    ap.add_argument("--work", default="", help="working folder (default: a temporary one)")
    a = ap.parse_args()
    builds = [b.split("=", 1) for b in a.build]
    compare.torch.set_num_threads(a.threads)
    work = a.work or compare.tempfile.mkdtemp(prefix="cpu-vs-commits-")
    os.makedirs(work, exist_ok=True)
    results = []
    for name in compare.case_names(a.cases):
        if name == "builtin-video":
            sys.exit("builtin-video runs the vdpp command, not the helper: compare.py's case only")
        print(f"== {name}", file=sys.stderr, flush=True)
        d, torch_call, go_args = compare.network_case(name, work, a.seed)
        ref, _, _ = compare.timed(torch_call)
        compare.write_safetensors(os.path.join(d, "torch_output.safetensors"), {"output": ref.numpy()})
        results.append(run_case(name, d, go_args, builds, a.threads, a.rounds, a.calls))
    print(f"CPU: {compare.cpu_name()}; {a.threads} threads each; {a.rounds} rounds x {a.calls} calls per build, "
          f"interleaved; ratios to {builds[0][0]}")
    print()
    print("| case | build | median / fastest (ms) | CPU ms median / fastest | ratio, median wall / CPU | rel L2 vs PyTorch | load avg |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        ref = r["builds"][0]
        for b in r["builds"]:
            print(f"| {r['case']} | {b['build']} | {b['median_ms']:.1f} / {b['min_ms']:.1f} | "
                  f"{b['median_cpu_ms']:.1f} / {b['min_cpu_ms']:.1f} | "
                  f"{b['median_ms'] / ref['median_ms']:.3f} / {b['median_cpu_ms'] / ref['median_cpu_ms']:.3f} | "
                  f"{b['rel_l2_vs_torch']:.1e} | {r['load_avg_1min'][0]}-{r['load_avg_1min'][1]} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"cpu": compare.cpu_name(), "threads": a.threads, "rounds": a.rounds, "calls": a.calls,
                       "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
