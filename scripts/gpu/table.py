#!/usr/bin/env python3
"""Build the Markdown results table of scripts/gpu-check.sh from its results folder.

Usage: table.py RESULTS_DIR > results.md

Nothing is invented: a measurement that is missing or failed shows as such, with the
last line of its log."""
import glob
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def last_line(path):
    lines = [l for l in read(path).splitlines() if l.strip()]
    return lines[-1][:160] if lines else "no output"


def status(d, stem):
    """Why a measurement is missing: its exit code and last log line."""
    if not os.path.exists(os.path.join(d, stem + ".txt")):
        return "not run"
    rc = read(os.path.join(d, stem + ".rc"), "?")
    return f"failed (exit {rc}): {last_line(os.path.join(d, stem + '.txt'))}".replace("|", "/")


def fmt(x, spec):
    return "–" if x is None else format(x, spec)


def main():
    d = sys.argv[1]
    out = []
    env = read(os.path.join(d, "env.txt"), "(env phase not run)")
    peak = load(os.path.join(d, "peak.json")) or {}
    out.append("# vdpp GPU check\n")
    out.append("```\n" + env + "\n```\n")
    if peak:
        out.append(f"Measured matrix-product ceilings (PyTorch, 8192³, random data): bf16 "
                   f"{peak['bf16_tflops']:.0f} TFLOP/s, fp32 with TF32 {peak['tf32_tflops']:.0f} TFLOP/s.\n")

    # Parity.
    out.append("## Parity on golden/dev under XLA CUDA (target: relative L2 <= 1e-3)\n")
    par = load(os.path.join(d, "parity.json"))
    if par is None:
        out.append(status(d, "parity") + "\n")
    else:
        out.append(f"Backend `{par.get('backend', '?')}`; the parity command's own verdict (its CPU "
                   f"tolerances): {'pass' if par.get('pass') else 'FAIL'} (exit {read(os.path.join(d, 'parity.rc'), '?')}).\n")
        out.append("| case | tensors | max rel L2 | all <= 1e-3 | errors |")
        out.append("| --- | ---: | ---: | --- | --- |")
        cases = {}
        for r in par.get("results", []):
            cases.setdefault(r.get("case", "?"), []).append(r)
        for c, rs in cases.items():
            rels = [r.get("rel_l2") for r in rs if isinstance(r.get("rel_l2"), (int, float))]
            errs = [r["error"] for r in rs if r.get("error")]
            worst = max(rels) if rels else None
            ok = not errs and rels and all(x <= 1e-3 for x in rels)
            out.append(f"| {c} | {len(rs)} | {fmt(worst, '.2e')} | {'yes' if ok else 'NO'} | "
                       f"{'; '.join(errs)[:120].replace('|', '/') or '–'} |")
        out.append("")

    # UNet timings.
    out.append("## SVD-XT UNet, 576x1024 (72x128 latents), batch 2, random weights\n")
    out.append("Time per denoiser call (median of the timed calls); TFLOP/s from vdpp's FLOP count "
               "(model/svd/unetcost: convolutions, linear layers, attention products); peak GPU memory: "
               "PyTorch's max_memory_allocated (reserved in brackets), vdpp's the device's used memory "
               "above idle sampled by nvidia-smi (XLA allocator, no preallocation).\n")
    out.append("| frames | implementation | dtype | median ms | min ms | TFLOP/call | TFLOP/s | % of peak | peak GPU GiB | Go time / this |")
    out.append("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    frames = sorted({int(p.rsplit("_", 1)[1].split(".")[0]) for p in glob.glob(os.path.join(d, "count_*.json"))} |
                    {int(p.rsplit("_", 1)[1].split(".")[0]) for p in glob.glob(os.path.join(d, "torch_*_*_*.txt"))} |
                    {int(p.rsplit("_", 1)[1].split(".")[0]) for p in glob.glob(os.path.join(d, "go_*_*.txt"))})
    for f in frames:
        count = load(os.path.join(d, f"count_{f}.json")) or {}
        flops = count.get("flops")
        rows = []
        for p in sorted(glob.glob(os.path.join(d, f"go_*_{f}.txt"))):
            stem = os.path.basename(p)[:-4]
            rows.append(("vdpp Go/XLA", stem.split("_")[1], stem, load(os.path.join(d, stem + ".json")), "go"))
        for mode, name in (("eager", "PyTorch eager (SDPA)"), ("compile", "PyTorch torch.compile")):
            for p in sorted(glob.glob(os.path.join(d, f"torch_{mode}_*_{f}.txt"))):
                stem = os.path.basename(p)[:-4]
                rows.append((name, stem.split("_")[2], stem, load(os.path.join(d, stem + ".json")), "torch"))
        go_ms = {r[1]: r[3]["median_ms"] for r in rows if r[4] == "go" and r[3]}
        for name, dt, stem, res, kind in rows:
            if res is None:
                out.append(f"| {f} | {name} | {dt} | {status(d, stem)} | | | | | | |")
                continue
            fl = flops if flops is not None else res.get("flops")
            tf = fl / (res["median_ms"] / 1000) / 1e12 if fl else None
            ceiling = peak.get("bf16_tflops") if dt in ("bf16", "f16") else peak.get("tf32_tflops")
            pct = 100 * tf / ceiling if tf and ceiling else None
            if kind == "go":
                mem = read(os.path.join(d, stem + ".mem"))
                memtxt = f"{int(mem) / 1024:.1f}" if mem.lstrip("-").isdigit() else "–"
                ratio = "1.00"
            else:
                memtxt = f"{res['peak_allocated_bytes'] / 2**30:.1f} ({res['peak_reserved_bytes'] / 2**30:.1f})"
                ratio = fmt(go_ms[dt] / res["median_ms"], ".2f") if dt in go_ms else "–"
            out.append(f"| {f} | {name} | {dt} | {res['median_ms']:.1f} | {res['min_ms']:.1f} | "
                       f"{fmt(fl / 1e12 if fl else None, '.1f')} | {fmt(tf, '.0f')} | {fmt(pct, '.0f')} | {memtxt} | {ratio} |")
    out.append("")
    out.append("Target: vdpp's time per call <= 0.8x PyTorch eager's in the same dtype (the last column <= 0.80).\n")

    # Multi-process bench.
    out.append("## `vdpp bench --model svd` on golden/dev, processes sharing the GPU\n")
    out.append("| processes | exit | equal to 1-rank baseline | steady ms/sample | speedup | peak GPU MiB |")
    out.append("| ---: | ---: | --- | ---: | ---: | ---: |")
    for p in sorted(glob.glob(os.path.join(d, "multi_*.txt")), key=lambda s: int(s.rsplit("_", 1)[1][:-4])):
        n = p.rsplit("_", 1)[1][:-4]
        res = load(os.path.join(d, f"multi_{n}.json"))
        rc = read(os.path.join(d, f"multi_{n}.rc"), "?")
        mem = read(os.path.join(d, f"multi_{n}.mem"), "–")
        if res is None:
            out.append(f"| {n} | {rc} | {status(d, f'multi_{n}')} | | | {mem} |")
            continue
        eq = res.get("equal_to_baseline")
        out.append(f"| {n} | {rc} | {'yes' if eq else ('NO' if eq is not None else '–')} | "
                   f"{fmt(res.get('steady_sample_ms'), '.1f')} | {fmt(res.get('speedup'), '.2f')} | {mem} |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
