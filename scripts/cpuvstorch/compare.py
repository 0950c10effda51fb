"""vdpp (pure-Go backend with its CPU kernels) against diffusers on PyTorch, side by side on
this CPU: the same weights and inputs, the same number of threads, calls interleaved in
rounds (PyTorch K calls, vdpp K calls, PyTorch K calls, ...) so that both see the same
machine load. Run through scripts/cpu-vs-torch.sh, which builds vdpp first.

Cases:
  a  builtin-unet     the built-in model's UNet, one guided call (batch 2, 14 frames, 64x64)
  b  mid-unet         a mid-size SVD UNet (channels 64/128/256, random weights), batch 2,
                      14 frames, 128x128
  c  wan-transformer  the Wan transformer call of docs/wan.md (8 heads x 128, ffn 2816,
                      2 layers, 1536 tokens, 512 text rows; random weights)
  d  svd-vae-decode   the built-in VAE decoding one clip (14 frames, 64x64, chunks of 7)
     wan-vae-decode   a Wan 2.1-shaped VAE (base 32, random weights) decoding one clip
                      (3 latent frames -> 9 frames, 128x128)
  e  builtin-video    one whole built-in video: `vdpp generate --model builtin` (25 steps,
                      a process per video) against the same pipeline steps in-process with
                      diffusers' modules (VAE encode, 25 guided UNet calls with the Euler
                      scheduler, VAE decode; diffusers' pipeline class needs transformers'
                      CLIP, which Debian's python3 lacks, so PyTorch skips the image encoder)

Every call's wall time and process CPU time (user + system over all threads) is recorded;
the summary gives the median and the fastest call of each side and the speed ratio
PyTorch / vdpp (above 1: vdpp is faster), plus the 1-minute load average before and after.
"""
import argparse
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts", "wanref"))
from common import import_diffusers, read_safetensors, write_safetensors  # noqa: E402

import_diffusers()
import numpy as np  # noqa: E402
import torch  # noqa: E402

MID_UNET = dict(
    addition_time_embed_dim=64, projection_class_embeddings_input_dim=192, block_out_channels=[64, 128, 256],
    cross_attention_dim=256,
    down_block_types=["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
    up_block_types=["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"],
    in_channels=8, out_channels=4, layers_per_block=2, num_attention_heads=[1, 2, 4], num_frames=14, sample_size=16)

WAN_TRANSFORMER = dict(
    patch_size=[1, 2, 2], num_attention_heads=8, attention_head_dim=128, in_channels=16, out_channels=16,
    text_dim=4096, freq_dim=256, ffn_dim=2816, num_layers=2, cross_attn_norm=True,
    qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None, added_kv_proj_dim=None, rope_max_seq_len=1024,
    pos_embed_seq_len=None)

WAN_VAE = dict(
    base_dim=32, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
    temperal_downsample=[False, True, True], dropout=0.0, latents_mean=[0.0] * 16, latents_std=[1.0] * 16)

BUILTIN = os.path.join(REPO, "builtin", "model")


def load_torch(model, path):
    state = {k: torch.from_numpy(v) for k, v in read_safetensors(path).items()}
    model.load_state_dict(state)


def perturb(model, seed):
    """Random weights that exercise every layer: each parameter plus 0.02·N(0, 1)
    (diffusers initialises some projections to zero)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))


def save_case(work, name, cfg, class_name, model, inputs):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(dict(cfg, _class_name=class_name), fh)
    write_safetensors(os.path.join(d, "diffusion_pytorch_model.safetensors"),
                      {k: v.detach().numpy() for k, v in model.state_dict().items()})
    write_safetensors(os.path.join(d, "inputs.safetensors"), {k: v.numpy() for k, v in inputs.items()})
    return d


def svd_unet_case(work, name, cfg, weights, batch, h, w, seed):
    from diffusers.models.unets.unet_spatio_temporal_condition import UNetSpatioTemporalConditionModel
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    torch.manual_seed(seed)
    model = UNetSpatioTemporalConditionModel(**cfg).eval()
    if weights:
        load_torch(model, weights)
    else:
        perturb(model, seed)
    g = torch.Generator().manual_seed(seed)
    frames = cfg["num_frames"]
    inputs = {
        "sample": torch.randn(batch, frames, cfg["in_channels"], h, w, generator=g),
        "timestep": torch.tensor([0.7]),
        "encoder_hidden_states": torch.randn(batch, 1, cfg["cross_attention_dim"], generator=g),
        "added_time_ids": torch.tensor([[6.0, 127.0, 0.02]] * batch),
    }
    d = save_case(work, name, cfg, "UNetSpatioTemporalConditionModel", model, inputs)

    def call():
        return model(inputs["sample"], inputs["timestep"], inputs["encoder_hidden_states"],
                     added_time_ids=inputs["added_time_ids"], return_dict=False)[0]
    return d, call, ["-case", "svd-unet"]


def svd_vae_case(work, seed):
    from diffusers.models.autoencoders.autoencoder_kl_temporal_decoder import AutoencoderKLTemporalDecoder
    with open(os.path.join(BUILTIN, "vae", "config.json")) as fh:
        cfg = {k: v for k, v in json.load(fh).items() if not k.startswith("_")}
    model = AutoencoderKLTemporalDecoder(**cfg).eval()
    load_torch(model, os.path.join(BUILTIN, "vae", "diffusion_pytorch_model.safetensors"))
    g = torch.Generator().manual_seed(seed)
    inputs = {"latents": torch.randn(14, cfg["latent_channels"], 8, 8, generator=g)}
    d = save_case(work, "svd-vae-decode", cfg, "AutoencoderKLTemporalDecoder", model, inputs)
    chunk = 7

    def call():
        z = inputs["latents"]
        return torch.cat([model.decode(z[i:i + chunk], num_frames=len(z[i:i + chunk])).sample
                          for i in range(0, len(z), chunk)])
    return d, call, ["-case", "svd-vae-decode", "-chunk", str(chunk)]


def wan_transformer_case(work, seed):
    from diffusers.models.transformers.transformer_wan import WanTransformer3DModel
    gen = torch.Generator().manual_seed(seed)
    model = WanTransformer3DModel(**WAN_TRANSFORMER).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen)
            p.copy_(1 + 0.1 * r if "norm" in name else 0.02 * r)
    inputs = {
        "hidden_states": torch.randn(1, 16, 4, 32, 48, generator=gen),
        "timestep": torch.tensor([937.0]),
        "encoder_hidden_states": torch.randn(1, 512, 4096, generator=gen),
    }
    d = save_case(work, "wan-transformer", WAN_TRANSFORMER, "WanTransformer3DModel", model, inputs)

    def call():
        return model(inputs["hidden_states"], inputs["timestep"], inputs["encoder_hidden_states"], return_dict=False)[0]
    return d, call, ["-case", "wan-transformer"]


def wan_vae_case(work, seed):
    from diffusers.models.autoencoders.autoencoder_kl_wan import AutoencoderKLWan
    torch.manual_seed(seed)
    model = AutoencoderKLWan(**WAN_VAE).eval()
    perturb(model, seed)
    g = torch.Generator().manual_seed(seed)
    inputs = {"latents": torch.randn(1, WAN_VAE["z_dim"], 3, 16, 16, generator=g)}
    d = save_case(work, "wan-vae-decode", WAN_VAE, "AutoencoderKLWan", model, inputs)

    def call():
        return model.decode(inputs["latents"]).sample
    return d, call, ["-case", "wan-vae-decode"]


class TorchVideo:
    """The built-in model's image-to-video sampling in diffusers' modules, in-process: the
    steps of StableVideoDiffusionPipeline.__call__ without the CLIP image encoder (zero
    image embeddings), at the model's defaults (25 steps, 14 frames, 64x64, guidance 2 -> 4,
    fps 7, motion bucket 127, noise augmentation 0.02, decode chunks of 7)."""

    def __init__(self, seed):
        from diffusers.models.autoencoders.autoencoder_kl_temporal_decoder import AutoencoderKLTemporalDecoder
        from diffusers.models.unets.unet_spatio_temporal_condition import UNetSpatioTemporalConditionModel
        from diffusers.schedulers.scheduling_euler_discrete import EulerDiscreteScheduler

        def cfg(part):
            with open(os.path.join(BUILTIN, part, "config.json")) as fh:
                return {k: v for k, v in json.load(fh).items() if not k.startswith("_")}
        self.unet = UNetSpatioTemporalConditionModel(**cfg("unet")).eval()
        load_torch(self.unet, os.path.join(BUILTIN, "unet", "diffusion_pytorch_model.safetensors"))
        self.vae = AutoencoderKLTemporalDecoder(**cfg("vae")).eval()
        load_torch(self.vae, os.path.join(BUILTIN, "vae", "diffusion_pytorch_model.safetensors"))
        with open(os.path.join(BUILTIN, "scheduler", "scheduler_config.json")) as fh:
            self.sched_cfg = {k: v for k, v in json.load(fh).items() if not k.startswith("_")}
        self.EulerDiscreteScheduler = EulerDiscreteScheduler
        g = torch.Generator().manual_seed(seed)
        self.image = torch.rand(1, 3, 64, 64, generator=g) * 2 - 1
        self.g = g

    def __call__(self):
        frames, steps, chunk = 14, 25, 7
        unet, vae = self.unet, self.vae
        sched = self.EulerDiscreteScheduler.from_config(self.sched_cfg)
        image = self.image + 0.02 * torch.randn(self.image.shape, generator=self.g)
        ehs = torch.zeros(2, 1, unet.config.cross_attention_dim)
        lat = vae.encode(image).latent_dist.mode()
        lat = torch.cat([torch.zeros_like(lat), lat]).unsqueeze(1).repeat(1, frames, 1, 1, 1)
        ids = torch.tensor([[6.0, 127.0, 0.02]] * 2)
        sched.set_timesteps(steps)
        x = torch.randn(1, frames, 4, 8, 8, generator=self.g) * sched.init_noise_sigma
        guidance = torch.linspace(2.0, 4.0, frames).view(1, frames, 1, 1, 1)
        for t in sched.timesteps:
            inp = sched.scale_model_input(torch.cat([x] * 2), t)
            noise = unet(torch.cat([inp, lat], dim=2), t, encoder_hidden_states=ehs, added_time_ids=ids,
                         return_dict=False)[0]
            uncond, cond = noise.chunk(2)
            x = sched.step(uncond + guidance * (cond - uncond), t, x).prev_sample
        z = x[0] / vae.config.scaling_factor
        out = torch.cat([vae.decode(z[i:i + chunk], num_frames=len(z[i:i + chunk])).sample
                         for i in range(0, frames, chunk)])
        return ((out / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8)


LETTERS = {"a": ["builtin-unet"], "b": ["mid-unet"], "c": ["wan-transformer"],
           "d": ["svd-vae-decode", "wan-vae-decode"], "e": ["builtin-video"]}


def case_names(cases):
    """The case names of --cases: letters or names, comma-separated."""
    return [n for c in cases.split(",") for n in LETTERS.get(c.strip(), [c.strip()])]


def network_case(name, work, seed):
    """Writes network case name's folder under work and returns it, PyTorch's call and the
    helper's arguments."""
    if name == "builtin-unet":
        with open(os.path.join(BUILTIN, "unet", "config.json")) as fh:
            cfg = json.load(fh)
        return svd_unet_case(work, name, cfg, os.path.join(BUILTIN, "unet", "diffusion_pytorch_model.safetensors"),
                             2, 8, 8, seed)
    if name == "mid-unet":
        return svd_unet_case(work, name, MID_UNET, None, 2, 16, 16, seed)
    if name == "wan-transformer":
        return wan_transformer_case(work, seed)
    if name == "svd-vae-decode":
        return svd_vae_case(work, seed)
    if name == "wan-vae-decode":
        return wan_vae_case(work, seed)
    sys.exit(f"unknown case {name!r}")


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(fn):
    c, s = time.process_time(), time.perf_counter()
    with torch.no_grad():
        out = fn()
    return out, (time.perf_counter() - s) * 1000, (time.process_time() - c) * 1000


def summary(ms, cpu):
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "median_cpu_ms": statistics.median(cpu),
            "ms": [round(x, 2) for x in ms], "cpu_ms": [round(x, 2) for x in cpu]}


def run_network(name, d, torch_call, go_args, binary, threads, rounds, calls, prepare=False):
    ref, warm_ms, _ = timed(torch_call)
    write_safetensors(os.path.join(d, "torch_output.safetensors"), {"output": ref.numpy()})
    if prepare:
        print(f"{name}: {d} (helper arguments {' '.join(go_args)})")
        return None
    env = dict(os.environ, GOMAXPROCS=str(threads))
    proc = subprocess.Popen([binary] + go_args + ["-dir", d], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    ready = json.loads(proc.stdout.readline())
    t_ms, t_cpu, v_ms, v_cpu = [], [], [], []
    load0 = os.getloadavg()[0]
    for _ in range(rounds):
        for _ in range(calls):
            _, ms, cpu = timed(torch_call)
            t_ms.append(ms)
            t_cpu.append(cpu)
        proc.stdin.write(f"run {calls}\n")
        proc.stdin.flush()
        got = json.loads(proc.stdout.readline())
        v_ms += got["ms"]
        v_cpu += got["cpu_ms"]
    proc.stdin.write("quit\n")
    proc.stdin.close()
    proc.wait()
    return {"case": name, "torch": summary(t_ms, t_cpu), "vdpp": summary(v_ms, v_cpu),
            "rel_l2_vs_torch": ready["rel_l2_vs_torch"], "vdpp_kernels": ready["kernels"],
            "load_avg_1min": [round(load0, 2), round(os.getloadavg()[0], 2)], "torch_first_call_ms": warm_ms,
            "vdpp_first_call_ms": ready["first_call_ms"]}


def run_video(binary, threads, rounds, calls, seed, work):
    video = TorchVideo(seed)
    timed(video)  # warm-up
    env = dict(os.environ, GOMAXPROCS=str(threads))
    image = os.path.join(REPO, "builtin", "example.png")
    t_ms, t_cpu, v_ms, v_cpu = [], [], [], []
    load0 = os.getloadavg()[0]
    out = os.path.join(work, "video")
    for r in range(rounds):
        for _ in range(calls):
            _, ms, cpu = timed(video)
            t_ms.append(ms)
            t_cpu.append(cpu)
        for i in range(calls):
            shutil.rmtree(out, ignore_errors=True)
            c, s = children_cpu(), time.perf_counter()
            subprocess.run([binary, "generate", "--model", "builtin", "--image", image, "--out", out,
                            "--seed", str(seed + r * calls + i)], check=True, env=env, capture_output=True)
            v_ms.append((time.perf_counter() - s) * 1000)
            v_cpu.append((children_cpu() - c) * 1000)
    return {"case": "builtin-video", "torch": summary(t_ms, t_cpu), "vdpp": summary(v_ms, v_cpu),
            "load_avg_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
            "note": "vdpp: the whole command per video (process start, weights, PNG in, video out); "
                    "PyTorch: in-process sampling without the CLIP image encoder"}


def cpu_name():
    try:
        with open("/proc/cpuinfo") as fh:
            info = fh.read()
        name = next(line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name"))
        flags = next(line for line in info.splitlines() if line.startswith("flags"))
        isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
        return f"{name} ({isa}), {os.cpu_count()} logical CPUs"
    except (OSError, StopIteration):
        return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vdpp", required=True, help="the vdpp binary")
    ap.add_argument("--helper", required=True, help="the scripts/cpuvstorch binary")
    ap.add_argument("--cases", default="a,b,c,d,e", help="letters or names, comma-separated")
    ap.add_argument("--threads", type=int, default=2, help="threads of each side")
    ap.add_argument("--rounds", type=int, default=4, help="interleaved rounds")
    ap.add_argument("--calls", type=int, default=3, help="calls of each side per round")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", default="", help="also write the results here")
    ap.add_argument("--work", default="", help="working folder (default: a temporary one)")
    ap.add_argument("--prepare", action="store_true",
                    help="only write each network case's folder (weights, inputs, PyTorch's output) and print it")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    work = a.work or tempfile.mkdtemp(prefix="cpu-vs-torch-")
    os.makedirs(work, exist_ok=True)
    names = case_names(a.cases)
    results = []
    for name in names:
        print(f"== {name}", file=sys.stderr, flush=True)
        if name == "builtin-video":
            if a.prepare:
                continue
            res = run_video(a.vdpp, a.threads, a.rounds, a.calls, a.seed, work)
        else:
            case = network_case(name, work, a.seed)
            res = run_network(name, *case, a.helper, a.threads, a.rounds, a.calls, a.prepare)
            if res is None:
                continue
        t, v = res["torch"], res["vdpp"]
        res["speed_ratio_median"] = round(t["median_ms"] / v["median_ms"], 3)
        res["speed_ratio_fastest"] = round(t["min_ms"] / v["min_ms"], 3)
        res["cpu_ratio_median"] = round(t["median_cpu_ms"] / v["median_cpu_ms"], 3)
        results.append(res)
        print(json.dumps({k: res[k] for k in res if k not in ("torch", "vdpp")}), file=sys.stderr, flush=True)
    meta = {"cpu": cpu_name(), "threads": a.threads, "torch": torch.__version__,
            "torch_blas": sorted({line.split()[-1] for line in open("/proc/self/maps") if "blas" in line.lower() and "/" in line}),
            "rounds": a.rounds, "calls_per_round": a.calls}
    print(f"CPU: {meta['cpu']}; {a.threads} threads each; torch {meta['torch']} with {', '.join(meta['torch_blas']) or 'no BLAS found'}; "
          f"{a.rounds} rounds x {a.calls} calls per side, interleaved")
    print()
    print("| case | PyTorch median / fastest (ms) | vdpp median / fastest (ms) | speed PyTorch/vdpp, median / fastest | CPU time ratio | output rel L2 | load avg |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        t, v = r["torch"], r["vdpp"]
        l2 = r.get("rel_l2_vs_torch")
        print(f"| {r['case']} | {t['median_ms']:.1f} / {t['min_ms']:.1f} | {v['median_ms']:.1f} / {v['min_ms']:.1f} | "
              f"**{r['speed_ratio_median']:.2f}** / {r['speed_ratio_fastest']:.2f} | {r['cpu_ratio_median']:.2f} | "
              f"{'%.1e' % l2 if l2 is not None else '-'} | {r['load_avg_1min'][0]}-{r['load_avg_1min'][1]} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"meta": meta, "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
