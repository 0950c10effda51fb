"""Times one Wan transformer call in vdpp (pure-Go backend, vdpp's AVX2 matrix kernel)
against diffusers v0.35.2's WanTransformer3DModel on PyTorch CPU (Debian's python3-torch),
with the same weights and inputs, on the machine it runs on, in one run: PyTorch, then vdpp, then
PyTorch again (so a change of machine load shows as a difference between the two PyTorch
rounds). Both use every core. It prints a JSON summary and checks that the two outputs
agree. Ratios (vdpp / PyTorch, below 1 means vdpp is faster) are given for the fastest
call's wall time and for the least process CPU time (user + system over all threads) a
call took: on a shared machine the wall time depends on what else runs, the CPU time much
less.

    /usr/bin/python3 scripts/wanref/transformer_speed.py [--layers 2] [--iters 3] [--profile FILE]

Debian's torch multiplies matrices through libblas.so.3, by default the reference
implementation (libblas3, ~1 GFLOP/s). To time it with OpenBLAS instead without changing
the system, unpack the package next to the run and point the loader at it:

    apt-get download libopenblas0-pthread && dpkg -x libopenblas0-pthread_*.deb oblas
    LD_LIBRARY_PATH=$PWD/oblas/usr/lib/x86_64-linux-gnu/openblas-pthread /usr/bin/python3 scripts/wanref/transformer_speed.py

The summary's torch_blas names the library that was loaded.

The default config is a matmul-dominated slice of a real Wan: 8 heads x 128 (inner 1024),
ffn 2816, text_dim 4096 with 512 text rows, patch (1,2,2), 16 latent channels, latent
6 x 40 x 48 (2880 tokens), 2 layers.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from common import import_diffusers, write_safetensors

import_diffusers()
import torch  # noqa: E402
from diffusers.models.transformers.transformer_wan import WanTransformer3DModel  # noqa: E402

def blas_library():
    """The BLAS library this process loaded (Debian's torch links libblas.so.3, whichever
    implementation provides it: the reference one by default)."""
    with open("/proc/self/maps") as fh:
        libs = {line.split()[-1] for line in fh if "blas" in line.lower() and "/" in line}
    return sorted(libs)


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--ffn", type=int, default=2816)
    ap.add_argument("--latent", default="6,40,48", help="latent frames,height,width")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--profile", default="", help="CPU profile of vdpp's timed calls")
    ap.add_argument("--out", default="", help="working folder (default: a temporary one)")
    a = ap.parse_args()

    cfg = dict(patch_size=[1, 2, 2], num_attention_heads=a.heads, attention_head_dim=a.head_dim, in_channels=16,
               out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=a.ffn, num_layers=a.layers,
               cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None,
               added_kv_proj_dim=None, rope_max_seq_len=1024, pos_embed_seq_len=None)
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(7)
    model = WanTransformer3DModel(**cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.1 * r if "norm" in name else 0.02 * r)
    f, h, w = (int(x) for x in a.latent.split(","))
    hidden = torch.randn((1, 16, f, h, w), generator=gen)
    t = torch.tensor([937.0])
    text = torch.randn((1, 512, 4096), generator=gen)
    tokens = f * (h // 2) * (w // 2)

    work = a.out or tempfile.mkdtemp(prefix="wan-speed-")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "config.json"), "w") as fh:
        json.dump(dict(cfg, _class_name="WanTransformer3DModel"), fh)
    write_safetensors(os.path.join(work, "diffusion_pytorch_model.safetensors"),
                      {k: v.numpy() for k, v in model.state_dict().items()})
    write_safetensors(os.path.join(work, "inputs.safetensors"),
                      {"hidden_states": hidden.numpy(), "timestep": t.numpy(), "encoder_hidden_states": text.numpy()})

    def torch_round():
        ms, cpu = [], []
        with torch.no_grad():
            for _ in range(a.iters):
                c, s = time.process_time(), time.perf_counter()
                y = model(hidden, t, text, return_dict=False)[0]
                ms.append((time.perf_counter() - s) * 1000)
                cpu.append((time.process_time() - c) * 1000)
        return ms, cpu

    with torch.no_grad():
        y = model(hidden, t, text, return_dict=False)[0]  # warm-up
    write_safetensors(os.path.join(work, "torch_output.safetensors"), {"output": y.numpy()})
    torch1, tcpu1 = torch_round()

    binary = os.path.join(work, "wanbench")
    subprocess.run(["go", "build", "-o", binary, "./scripts/wanref/wanbench"], cwd=REPO, check=True)
    cmd = [binary, "-dir", work, "-iters", str(a.iters)]
    if a.profile:
        cmd += ["-cpuprofile", a.profile]
    go = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)

    torch2, tcpu2 = torch_round()
    torch_ms = min(torch1 + torch2)
    torch_cpu = min(tcpu1 + tcpu2)
    params = sum(p.numel() for p in model.parameters())
    summary = {
        "config": {k: cfg[k] for k in ("num_attention_heads", "attention_head_dim", "num_layers", "ffn_dim", "text_dim")},
        "latent": [16, f, h, w], "tokens": tokens, "text_rows": 512, "params_M": round(params / 1e6, 1),
        "threads": threads, "torch": torch.__version__, "torch_blas": blas_library(),
        "torch_ms_round1": [round(x) for x in torch1], "torch_ms_round2": [round(x) for x in torch2],
        "torch_cpu_ms": [round(x) for x in tcpu1 + tcpu2],
        "vdpp_ms": [round(x) for x in go["ms"]], "vdpp_cpu_ms": [round(x) for x in go["cpu_ms"]],
        "vdpp_warmup_ms": round(go["warmup_ms"]), "vdpp_kernels": go["vdpp_kernels"],
        "load_avg_1min": os.getloadavg()[0],
        "torch_min_ms": round(torch_ms), "vdpp_min_ms": round(go["min_ms"]),
        "vdpp_over_torch_wall": round(go["min_ms"] / torch_ms, 2),
        "torch_min_cpu_ms": round(torch_cpu), "vdpp_min_cpu_ms": round(go["min_cpu_ms"]),
        "vdpp_over_torch_cpu": round(go["min_cpu_ms"] / torch_cpu, 2),
        "output_rel_l2": go["rel_l2_vs_torch"],
    }
    print(json.dumps(summary, indent=1))
    if not go["rel_l2_vs_torch"] <= 1e-4:
        sys.exit("outputs differ")


if __name__ == "__main__":
    main()
