#!/usr/bin/env python3
"""Measure the GPU's matrix-product ceilings through PyTorch: an 8192^3 product on random
data in bf16 and in fp32 with TF32 allowed; median of 20 products after 5 warm-ups, timed
with CUDA events. Writes {"bf16_tflops": ..., "tf32_tflops": ..., "device": ...} (--json)."""
import argparse
import json
import statistics

import torch


def rate(dtype, n=8192, warm=5, reps=20):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(warm):
        a @ b
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1000)
    return 2 * n ** 3 / statistics.median(ts) / 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    res = dict(device=torch.cuda.get_device_name(0), bf16_tflops=rate(torch.bfloat16), tf32_tflops=rate(torch.float32))
    print(f"{res['device']}: bf16 {res['bf16_tflops']:.0f} TFLOP/s, tf32 {res['tf32_tflops']:.0f} TFLOP/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
