#!/usr/bin/env python3
"""Time diffusers' UNetSpatioTemporalConditionModel (SVD-XT config, random weights) on the
GPU, the PyTorch side of scripts/gpu-check.sh.

One call = one denoiser call of a sampling step: sample [B, T, 8, H/8, W/8], timestep [1],
encoder_hidden_states [B, 1, 1024], added_time_ids [B, 3]. Timing uses CUDA events around
each call after warm-up (the first compile for --mode compile); the median is reported.
Peak memory is torch.cuda.max_memory_allocated / max_memory_reserved over the timed calls
(weights included). Attention runs through SDPA (diffusers' AttnProcessor2_0, the default).
Writes one JSON object (--json) with the fields scripts/gpu/table.py reads.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

XT_CONFIG = dict(
    sample_size=96, in_channels=8, out_channels=4,
    down_block_types=("CrossAttnDownBlockSpatioTemporal",) * 3 + ("DownBlockSpatioTemporal",),
    up_block_types=("UpBlockSpatioTemporal",) + ("CrossAttnUpBlockSpatioTemporal",) * 3,
    block_out_channels=(320, 640, 1280, 1280), addition_time_embed_dim=256,
    projection_class_embeddings_input_dim=768, layers_per_block=2, cross_attention_dim=1024,
    transformer_layers_per_block=1, num_attention_heads=(5, 10, 20, 20), num_frames=25,
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--diffusers", default="third_party_ref/diffusers/src",
                    help="folder holding the diffusers package (its src/)")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    ap.add_argument("--frames", type=int, default=14)
    ap.add_argument("--height", type=int, default=576)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    sys.path.insert(0, os.path.abspath(a.diffusers))
    import torch
    from diffusers.models.unets.unet_spatio_temporal_condition import UNetSpatioTemporalConditionModel
    import diffusers

    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    # f32 matches vdpp's XLA run, which may use TF32 on the matrix units.
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")

    t0 = time.perf_counter()
    with torch.device(dev):
        unet = UNetSpatioTemporalConditionModel(**XT_CONFIG)
    unet = unet.to(dtype).eval()
    params = sum(p.numel() for p in unet.parameters())
    build_s = time.perf_counter() - t0

    fn = unet
    if a.mode == "compile":
        fn = torch.compile(unet)
    h, w = a.height // 8, a.width // 8
    g = torch.Generator(device=dev).manual_seed(a.seed)
    sample = torch.randn(a.batch, a.frames, 8, h, w, device=dev, dtype=dtype, generator=g)
    timestep = torch.tensor([0.25 * math.log(700.0)], device=dev, dtype=dtype)
    ehs = torch.randn(a.batch, 1, 1024, device=dev, dtype=dtype, generator=g)
    ids = torch.tensor([[6.0, 127.0, 0.02]] * a.batch, device=dev, dtype=dtype)

    def call():
        with torch.inference_mode():
            return fn(sample, timestep, ehs, added_time_ids=ids, return_dict=False)[0]

    t0 = time.perf_counter()
    out = call()
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    for _ in range(max(a.warmup - 1, 0)):
        call()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(a.iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        out = call()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    o = out.float()
    rms = float(o.pow(2).mean().sqrt())
    if not math.isfinite(rms) or rms == 0:
        raise SystemExit(f"output RMS {rms}: not a usable result")
    if list(out.shape) != [a.batch, a.frames, 4, h, w]:
        raise SystemExit(f"output shape {list(out.shape)}")
    res = dict(
        impl="torch", mode=a.mode, attention="sdpa", dtype=a.dtype, batch=a.batch, frames=a.frames,
        height=a.height, width=a.width, params=params, build_s=build_s, first_call_s=first_s,
        times_ms=times, median_ms=statistics.median(times), min_ms=min(times),
        mean_ms=statistics.fmean(times),
        peak_allocated_bytes=torch.cuda.max_memory_allocated(),
        peak_reserved_bytes=torch.cuda.max_memory_reserved(), output_rms=rms,
        torch=torch.__version__, cuda=torch.version.cuda, diffusers=diffusers.__version__,
        device=torch.cuda.get_device_name(0),
    )
    print(f"torch {a.mode} {a.dtype} batch {a.batch}, {a.frames} frames, {a.height}x{a.width}: "
          f"median {res['median_ms']:.2f} ms (first call {first_s:.1f} s), "
          f"peak {res['peak_allocated_bytes'] / 2**30:.1f} GiB allocated")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
