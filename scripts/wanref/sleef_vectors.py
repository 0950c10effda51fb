#!/usr/bin/python3
"""Test vectors for sched's port of SLEEF's float32 log, expm1 and exp (sched/sleef.go).

torch 1.13's CPU kernels compute float32 log, expm1 and exp with SLEEF 3.5.1 (Sleef_logf8_u10,
Sleef_expm1f8_u10, Sleef_expf8_u10; AVX2 on the development box), which are not correctly
rounded. The scalar coefficients of UniPC and DPM-Solver go through them, so sched reproduces them; this script records torch's own
results for inputs around the ones UniPC meets and across the float32 range.

Usage: /usr/bin/python3 scripts/wanref/sleef_vectors.py sched/testdata/sleef_vectors.safetensors
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_safetensors  # noqa: E402


def main():
    rng = np.random.default_rng(20251125)
    special = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 1e-45, 1e-40, 1.17549435e-38, 3.4028235e38]
    log_in = np.concatenate([
        np.exp(rng.uniform(np.log(1e-7), np.log(1e4), 6000)),
        rng.uniform(0.0, 1.0, 4000),  # sigmas and 1 − sigma of flow schedules
        1.0 - rng.uniform(0.0, 1e-3, 1000),
        np.exp(rng.uniform(-87, 88, 1000)),
        special,
    ]).astype(np.float32)
    expm1_in = np.concatenate([
        rng.uniform(-20, 20, 6000),
        rng.uniform(-1e-3, 1e-3, 2000),
        -np.exp(rng.uniform(np.log(1e-3), np.log(12), 3000)),  # −h of UniPC steps
        rng.uniform(-110, 95, 1000),
        special,
    ]).astype(np.float32)
    exp_in = np.concatenate([  # drawn after the others, which keep their values
        rng.uniform(-20, 20, 4000),
        -np.exp(rng.uniform(np.log(1e-3), np.log(12), 3000)),  # −h of DPM-Solver steps
        rng.uniform(-110, 95, 1000),
        special,
    ]).astype(np.float32)
    torch.set_num_threads(1)
    out = {
        "exp_in": exp_in, "exp_out": torch.exp(torch.from_numpy(exp_in)).numpy(),
        "log_in": log_in, "log_out": torch.log(torch.from_numpy(log_in)).numpy(),
        "expm1_in": expm1_in, "expm1_out": torch.expm1(torch.from_numpy(expm1_in)).numpy(),
    }
    # The 0-dim tensors UniPC uses take the same SLEEF path as vectors.
    for name, f in (("log", torch.log), ("expm1", torch.expm1), ("exp", torch.exp)):
        for i in range(0, len(out[name + "_in"]), 37):
            got = f(torch.tensor(out[name + "_in"][i])).numpy()
            assert got.tobytes() == out[name + "_out"][i].tobytes(), (name, i)
    write_safetensors(sys.argv[1], out)


if __name__ == "__main__":
    main()
