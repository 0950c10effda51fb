#!/usr/bin/python3
"""Reference cases for model/wan/vae: diffusers v0.35.2 AutoencoderKLWan, executed.

Run with Debian's /usr/bin/python3 (python3-torch 1.13, numpy):

    git --git-dir="$DIFFUSERS_GIT_DIR" archive v0.35.2 src/diffusers | tar -x -C /tmp/d
    /usr/bin/python3 scripts/wan_vae_reference.py --diffusers /tmp/d/src/diffusers --out model/wan/vae/testdata

autoencoder_kl_wan.py is executed unmodified. The development box has no huggingface_hub, so the
package's import-only infrastructure is stubbed (ConfigMixin / register_to_config record the
constructor arguments as .config, ModelMixin is nn.Module, logging and apply_forward_hook are
no-ops, the output dataclasses hold their fields). The two pieces of math that live in other
files, get_activation (activations.py) and DiagonalGaussianDistribution (autoencoders/vae.py),
are taken from the diffusers source itself. torch 1.13 lacks F.scaled_dot_product_attention:
it is added as the exact softmax(q·kᵀ/√d)·v. Nothing else is changed.

With --check-golden DIR the harness first reruns the shared wan-dev vae_encode / vae_decode
cases and prints their relative L2 (must be ~0), which shows the stubs change nothing.

Each case folder holds config.json + diffusion_pytorch_model.safetensors (weights),
inputs.safetensors, outputs.safetensors and case.json (the call and its arguments).
"""

import argparse
import ast
import dataclasses
import functools
import inspect
import json
import math
import os
import struct
import sys
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


# ---------------------------------------------------------------- shims (torch 1.13 lacks)
def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    assert attn_mask is None and dropout_p == 0.0 and not is_causal
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    return torch.softmax(q @ k.transpose(-2, -1) * s, dim=-1) @ v


if not hasattr(F, "scaled_dot_product_attention"):
    F.scaled_dot_product_attention = _sdpa


# ---------------------------------------------------------------- safetensors (numpy)
def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name].detach().cpu().numpy().astype("<f4"))
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", e
        a, b = e["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").reshape(e["shape"]).copy())
    return out


# ---------------------------------------------------------------- import-only stubs
def _extract(path, names, env):
    """Executes the top-level definitions `names` of a diffusers source file in env."""
    src = open(path).read()
    tree = ast.parse(src)
    keep = [n for n in tree.body if getattr(n, "name", None) in names or
            (isinstance(n, ast.Assign) and any(getattr(t, "id", None) in names for t in n.targets))]
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), env)


def load_wan_module(diffusers_dir):
    def pkg(name):
        m = types.ModuleType(name)
        m.__path__ = []
        sys.modules[name] = m
        return m

    def mod(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    for p in ["diffusers", "diffusers.models", "diffusers.models.autoencoders", "diffusers.utils"]:
        pkg(p)

    def register_to_config(init):
        sig = inspect.signature(init)

        @functools.wraps(init)
        def wrapped(self, *args, **kwargs):
            bound = sig.bind(self, *args, **kwargs)
            bound.apply_defaults()
            init(self, *args, **kwargs)
            cfg = dict(bound.arguments)
            cfg.pop("self")
            self.config = types.SimpleNamespace(**cfg)

        return wrapped

    class _Logger:
        def __getattr__(self, _):
            return lambda *a, **k: None

    mod("diffusers.configuration_utils", ConfigMixin=type("ConfigMixin", (), {}),
        register_to_config=register_to_config)
    mod("diffusers.loaders", FromOriginalModelMixin=type("FromOriginalModelMixin", (), {}))
    sys.modules["diffusers.utils"].logging = types.SimpleNamespace(get_logger=lambda *_: _Logger())
    mod("diffusers.utils.accelerate_utils", apply_forward_hook=lambda f: f)
    mod("diffusers.models.modeling_utils", ModelMixin=nn.Module)

    @dataclasses.dataclass
    class AutoencoderKLOutput:
        latent_dist: object

    @dataclasses.dataclass
    class DecoderOutput:
        sample: torch.Tensor
        commit_loss: object = None

    mod("diffusers.models.modeling_outputs", AutoencoderKLOutput=AutoencoderKLOutput)
    act = {"nn": nn, "torch": torch}
    _extract(os.path.join(diffusers_dir, "models/activations.py"), {"ACT2CLS", "get_activation"}, act)
    mod("diffusers.models.activations", get_activation=act["get_activation"])
    import typing
    vae_env = {"torch": torch, "Optional": typing.Optional, "Tuple": typing.Tuple, "np": np}
    _extract(os.path.join(diffusers_dir, "models/autoencoders/vae.py"), {"DiagonalGaussianDistribution"}, vae_env)
    mod("diffusers.models.autoencoders.vae", DecoderOutput=DecoderOutput,
        DiagonalGaussianDistribution=vae_env["DiagonalGaussianDistribution"])

    path = os.path.join(diffusers_dir, "models/autoencoders/autoencoder_kl_wan.py")
    m = types.ModuleType("diffusers.models.autoencoders.autoencoder_kl_wan")
    m.__package__ = "diffusers.models.autoencoders"
    m.__file__ = path
    sys.modules[m.__name__] = m
    exec(compile(open(path).read(), path, "exec"), m.__dict__)
    return m


# ---------------------------------------------------------------- cases
def rel_l2(a, b):
    return float((a - b).double().norm() / b.double().norm())


def make_vae(wan, cfg, seed):
    torch.manual_seed(seed)
    kw = {k: v for k, v in cfg.items() if not k.startswith("_")}
    vae = wan.AutoencoderKLWan(**kw).eval()
    with torch.no_grad():
        for p in vae.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return vae


def save_case(out, name, cfg, vae, inputs, outputs, args):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    full = {"_class_name": "AutoencoderKLWan", "_diffusers_version": "0.35.2"}
    full.update({k: v for k, v in vars(vae.config).items()})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(full, f, indent=2)
    write_safetensors(os.path.join(d, "diffusion_pytorch_model.safetensors"), vae.state_dict())
    write_safetensors(os.path.join(d, "inputs.safetensors"), inputs)
    write_safetensors(os.path.join(d, "outputs.safetensors"), outputs)
    info = {"case": name, "diffusers": "v0.35.2", "torch": torch.__version__, "args": args,
            "inputs": {k: list(v.shape) for k, v in inputs.items()},
            "outputs": {k: list(v.shape) for k, v in outputs.items()}}
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(name, {k: list(v.shape) for k, v in outputs.items()})


def encode_outputs(vae, video):
    post = vae.encode(video).latent_dist
    return {"moments": post.parameters, "mean": post.mean, "logvar": post.logvar, "std": post.std}


def check_golden(wan, golden):
    cfg = json.load(open(os.path.join(golden, "vae/config.json")))
    vae = wan.AutoencoderKLWan(**{k: v for k, v in cfg.items() if not k.startswith("_")}).eval()
    vae.load_state_dict(read_safetensors(os.path.join(golden, "vae/diffusion_pytorch_model.safetensors")))
    cases = os.path.join(golden, "cases")
    with torch.no_grad():
        inp = read_safetensors(os.path.join(cases, "vae_encode/inputs.safetensors"))
        want = read_safetensors(os.path.join(cases, "vae_encode/outputs.safetensors"))
        got = encode_outputs(vae, inp["video"])
        for k in want:
            print("golden vae_encode", k, rel_l2(got[k], want[k]))
        inp = read_safetensors(os.path.join(cases, "vae_decode/inputs.safetensors"))
        want = read_safetensors(os.path.join(cases, "vae_decode/outputs.safetensors"))
        print("golden vae_decode video", rel_l2(vae.decode(inp["latents"]).sample, want["video"]))
        print("golden vae_decode video_1frame",
              rel_l2(vae.decode(inp["latents_1frame"]).sample, want["video_1frame"]))


DEV = dict(base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=2, attn_scales=[],
           temperal_downsample=[False, True, True], dropout=0.0,
           latents_mean=[-0.626, 0.3602, -0.2894, 0.422], latents_std=[2.46, 2.5637, 2.0967, 2.7298])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--diffusers", required=True, help="src/diffusers of v0.35.2")
    ap.add_argument("--out", required=True)
    ap.add_argument("--check-golden", default="")
    a = ap.parse_args()
    wan = load_wan_module(a.diffusers)
    if a.check_golden:
        check_golden(wan, a.check_golden)

    g = torch.Generator().manual_seed(2024)

    def uniform(*shape):
        return torch.rand(*shape, generator=g) * 2 - 1

    def normal(*shape):
        return torch.randn(*shape, generator=g)

    with torch.no_grad():
        # Another Wan 2.1-style config: 3 levels, temporal downsample first (2x in time, 4x in
        # space), another decoder width, z_dim 6, one resnet per level, non-square, 13 frames.
        cfg = dict(base_dim=8, decoder_base_dim=6, z_dim=6, dim_mult=[1, 2, 2], num_res_blocks=1,
                   attn_scales=[], temperal_downsample=[True, False], dropout=0.0,
                   latents_mean=[0.1, -0.2, 0.3, -0.4, 0.5, -0.6], latents_std=[1.5, 2.0, 2.5, 3.0, 3.5, 4.0])
        vae = make_vae(wan, cfg, 11)
        video = uniform(1, 3, 13, 24, 40)
        latents = normal(2, 6, 4, 6, 10)
        out = encode_outputs(vae, video)
        out["video"] = vae.decode(latents).sample
        save_case(a.out, "config_b", cfg, vae, {"video": video, "latents": latents}, out,
                  {"encode": "vae.encode(video).latent_dist", "decode": "vae.decode(latents).sample"})

        # The dev-shaped config, tiled: enable_tiling with non-square tiles smaller than the input.
        vae = make_vae(wan, DEV, 12)
        tiling = dict(tile_sample_min_height=32, tile_sample_min_width=48,
                      tile_sample_stride_height=24, tile_sample_stride_width=32)
        vae.enable_tiling(**tiling)
        video = uniform(1, 3, 5, 56, 88)
        latents = normal(1, 4, 2, 7, 11)
        out = encode_outputs(vae, video)
        out["video"] = vae.decode(latents).sample
        vae.disable_tiling()
        out["video_untiled"] = vae.decode(latents).sample
        save_case(a.out, "tiled", DEV, vae, {"video": video, "latents": latents}, out,
                  {"enable_tiling": tiling, "encode": "vae.encode(video).latent_dist (tiled)",
                   "decode": "vae.decode(latents).sample (tiled; video_untiled with tiling disabled)"})

        # The Wan 2.2 TI2V variant: residual blocks (AvgDown3D / DupUp3D shortcuts), patch size 2,
        # 12 channels in and out, a wider decoder.
        cfg = dict(base_dim=4, decoder_base_dim=6, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1,
                   attn_scales=[], temperal_downsample=[False, True, True], dropout=0.0,
                   latents_mean=[0.0, 0.1, -0.1, 0.2], latents_std=[1.0, 1.1, 1.2, 1.3],
                   is_residual=True, in_channels=12, out_channels=12, patch_size=2,
                   scale_factor_temporal=4, scale_factor_spatial=16)
        vae = make_vae(wan, cfg, 13)
        video = uniform(1, 3, 9, 64, 32)
        latents = normal(1, 4, 3, 4, 2)
        out = encode_outputs(vae, video)
        out["video"] = vae.decode(latents).sample
        save_case(a.out, "ti2v", cfg, vae, {"video": video, "latents": latents}, out,
                  {"encode": "vae.encode(video).latent_dist", "decode": "vae.decode(latents).sample"})


if __name__ == "__main__":
    main()
