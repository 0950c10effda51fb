#!/usr/bin/python3
"""Reference cases for vdpp's LoRA loading (package model/lora and the families' merge).

PEFT (which diffusers' load_lora_weights and fuse_lora run on) imports transformers and
accelerate at import time and does not run on Debian's torch 1.13 without them, so this
script executes what diffusers v0.35.2 does before PEFT, unmodified, and PEFT's merge
written out: the Wan LoRAs in the original layout and musubi-tuner's kohya-style layout go
through diffusers' own converters (_convert_non_diffusers_wan_lora_to_diffusers,
_convert_musubi_wan_lora_to_diffusers, which bake alpha / rank into the factors), a
diffusers-layout LoRA is taken as it is (no metadata: PEFT's lora_alpha = r); then every
converted module is fused as PEFT's LoraLayer.merge does after fuse_lora(lora_scale=s):
W += (lora_B @ lora_A) * s and, for lora_B.bias (the original layout's diff_b), b += bias * s,
one adapter after the other. diffusers has no LoRA loader for Stable Video Diffusion; its
cases fuse W += s * (alpha / r) * (up @ down) (a convolution's factors reshaped to 2-D) on the
UNet's own module names, in the diffusers layout (unet.<module>.lora_A.weight) and kohya's
(lora_unet_<module with _ for .>.lora_down.weight with .alpha).

Each case folder holds the LoRA files as stored (lora*.safetensors: the original layout in
BF16, as released files are, musubi's in F16, diffusers' in F32), fused.safetensors (every
weight a LoRA changed, fused), inputs.safetensors and outputs.safetensors (one network call
with the fused weights) and case.json (the files, strengths, experts, the call).

The base models are the golden folders: shared/golden/wan-dev (transformer, transformer_2)
and shared/golden/dev (unet).

    DIFFUSERS_GIT_DIR=... /usr/bin/python3 scripts/wanref/lora_cases.py ../shared/golden model/lora/testdata
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import import_diffusers, read_safetensors, write_safetensors  # noqa: E402

import_diffusers()

import torch  # noqa: E402
from diffusers.loaders.lora_conversion_utils import (  # noqa: E402
    _convert_musubi_wan_lora_to_diffusers,
    _convert_non_diffusers_wan_lora_to_diffusers,
)
from diffusers.models.transformers.transformer_wan import WanTransformer3DModel  # noqa: E402
from diffusers.models.unets.unet_spatio_temporal_condition import UNetSpatioTemporalConditionModel  # noqa: E402

RANK = 4


def bf16_round(a):
    """Rounds float32 values to bfloat16 (nearest even), as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def write_bf16(path, tensors):
    """Writes {name: float32 array, already bf16-exact} as a BF16 safetensors file."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        b = (a.view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_model(cls, folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    model = cls(**cfg).eval()
    w = read_safetensors(os.path.join(folder, "diffusion_pytorch_model.safetensors"))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()}, strict=True)
    return model, cfg


def factors(gen, out_dim, in_shape, rank=RANK):
    """Random down [r, in...] and up [out, r] factors."""
    down = 0.2 * torch.randn((rank, *in_shape), generator=gen)
    up = 0.2 * torch.randn((out_dim, rank), generator=gen)
    return down, up


# Wan's original module names and diffusers' (the converter's own mapping).
WAN_LINEARS = [("self_attn." + o, "attn1." + c) for o, c in zip("qkvo", ["to_q", "to_k", "to_v", "to_out.0"])] + \
              [("cross_attn." + o, "attn2." + c) for o, c in zip("qkvo", ["to_q", "to_k", "to_v", "to_out.0"])] + \
              [("ffn.0", "ffn.net.0.proj"), ("ffn.2", "ffn.net.2")]


def wan_original_lora(model, gen, blocks):
    """A lightx2v-like LoRA: every block linear with lora_down / lora_up / alpha and diff_b,
    zero norm diffs (as released files hold them), and head, time_projection, text and
    time embedding factors (no alpha there, as diffusers' converter requires)."""
    p = dict(model.named_parameters())
    sd = {}
    for i in range(blocks):
        for orig, diff in WAN_LINEARS:
            w = p[f"blocks.{i}.{diff}.weight"]
            down, up = factors(gen, w.shape[0], w.shape[1:])
            k = f"diffusion_model.blocks.{i}.{orig}"
            sd[k + ".lora_down.weight"], sd[k + ".lora_up.weight"] = down, up
            sd[k + ".alpha"] = torch.tensor(float(2 + i))  # alpha / rank = 0.5, 0.75
            sd[k + ".diff_b"] = 0.05 * torch.randn(w.shape[:1], generator=gen)
        sd[f"diffusion_model.blocks.{i}.norm3.diff"] = torch.zeros(p[f"blocks.{i}.norm2.weight"].shape)
        sd[f"diffusion_model.blocks.{i}.self_attn.norm_q.diff"] = torch.zeros(p[f"blocks.{i}.attn1.norm_q.weight"].shape)
    for orig, diff in [("head.head", "proj_out"), ("time_projection.1", "condition_embedder.time_proj"),
                       ("text_embedding.0", "condition_embedder.text_embedder.linear_1"),
                       ("time_embedding.0", "condition_embedder.time_embedder.linear_1")]:
        w = p[diff + ".weight"]
        down, up = factors(gen, w.shape[0], w.shape[1:])
        sd[f"diffusion_model.{orig}.lora_down.weight"], sd[f"diffusion_model.{orig}.lora_up.weight"] = down, up
        if orig in ("head.head", "time_projection.1"):
            sd[f"diffusion_model.{orig}.diff_b"] = 0.05 * torch.randn(w.shape[:1], generator=gen)
    return {k: torch.from_numpy(bf16_round(v.numpy())) for k, v in sd.items()}


def wan_musubi_lora(model, gen, blocks):
    """musubi-tuner's layout: lora_unet_blocks_N_<module>.lora_down/up + alpha, every linear."""
    p = dict(model.named_parameters())
    sd = {}
    for i in range(blocks):
        for orig, diff in WAN_LINEARS:
            w = p[f"blocks.{i}.{diff}.weight"]
            down, up = factors(gen, w.shape[0], w.shape[1:], rank=8)
            k = f"lora_unet_blocks_{i}_" + orig.replace(".", "_")
            sd[k + ".lora_down.weight"], sd[k + ".lora_up.weight"] = down, up
            sd[k + ".alpha"] = torch.tensor(4.0)
    return {k: v.half().float() for k, v in sd.items()}


def wan_diffusers_lora(model, gen, blocks):
    """The diffusers / PEFT layout on a few modules, one with a lora_B.bias."""
    p = dict(model.named_parameters())
    sd = {}
    for i in range(blocks):
        for diff in ["attn1.to_q", "attn1.to_v", "attn2.to_k", "ffn.net.0.proj"]:
            w = p[f"blocks.{i}.{diff}.weight"]
            down, up = factors(gen, w.shape[0], w.shape[1:])
            k = f"transformer.blocks.{i}.{diff}"
            sd[k + ".lora_A.weight"], sd[k + ".lora_B.weight"] = down, up
    sd["transformer.blocks.0.attn1.to_q.lora_B.bias"] = 0.05 * torch.randn(p["blocks.0.attn1.to_q.bias"].shape, generator=gen)
    return sd


def peft_fuse(model, converted, strength, prefix):
    """PEFT's merge of one converted adapter (lora_alpha = r: scaling 1) at lora_scale strength."""
    params = dict(model.named_parameters())
    changed = set()
    with torch.no_grad():
        for k, a in converted.items():
            if not k.endswith(".lora_A.weight"):
                continue
            mod = k[len(prefix) + 1:-len(".lora_A.weight")]
            b = converted[f"{prefix}.{mod}.lora_B.weight"]
            w = params[mod + ".weight"]
            delta = (b.flatten(1) @ a.flatten(1)).reshape(w.shape) * strength
            w += delta
            changed.add(mod + ".weight")
            bias = converted.get(f"{prefix}.{mod}.lora_B.bias")
            if bias is not None:
                params[mod + ".bias"] += bias * strength
                changed.add(mod + ".bias")
    return changed


def explicit_fuse(model, sd, strength, layout):
    """W += s * (alpha / r) * up @ down on the module names, for the SVD UNet."""
    params = dict(model.named_parameters())
    kohya = {("lora_unet_" + n[:-len(".weight")].replace(".", "_")): n[:-len(".weight")] for n in params if n.endswith(".weight")}
    changed = set()
    with torch.no_grad():
        for k, down in sd.items():
            if layout == "diffusers" and k.endswith(".lora_A.weight"):
                base, up, scale = k[:-len(".lora_A.weight")], sd[k.replace("lora_A", "lora_B")], 1.0
                mod = base[len("unet."):]
            elif layout == "kohya" and k.endswith(".lora_down.weight"):
                base = k[:-len(".lora_down.weight")]
                up, mod = sd[base + ".lora_up.weight"], kohya[base]
                scale = sd[base + ".alpha"].item() / down.shape[0]
            else:
                continue
            w = params[mod + ".weight"]
            w += (up.flatten(1) @ down.flatten(1)).reshape(w.shape) * (strength * scale)
            changed.add(mod + ".weight")
    return changed


def wan_inputs(folder):
    case = read_safetensors(os.path.join(folder, "cases", "transformer_forward", "inputs.safetensors"))
    return {k: torch.from_numpy(v) for k, v in case.items()}


def save_case(out, name, files, fused_names, model, inputs, y, meta):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    for fname, (sd, dtype) in files.items():
        arrays = {k: v.numpy().astype(np.float32) for k, v in sd.items()}
        path = os.path.join(d, fname)
        if dtype == "bf16":
            write_bf16(path, arrays)
        elif dtype == "f16":
            write_safetensors(path, {k: v.astype(np.float16) for k, v in arrays.items()})
        else:
            write_safetensors(path, arrays)
    p = dict(model.named_parameters())
    write_safetensors(os.path.join(d, "fused.safetensors"), {n: p[n].detach().numpy().copy() for n in sorted(fused_names)})
    write_safetensors(os.path.join(d, "inputs.safetensors"), {k: v.numpy().astype(np.float32) for k, v in inputs.items()})
    write_safetensors(os.path.join(d, "outputs.safetensors"), {"output": y.detach().numpy()})
    meta = dict(meta, case=name, diffusers="v0.35.2", torch=torch.__version__, fused=len(fused_names))
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(name, "fused", len(fused_names), "output", list(y.shape), "rms %.4f" % y.pow(2).mean().sqrt().item())


def wan_case(golden, out, name, loras, component="transformer", seed=0):
    """loras: [(layout, strength)] applied in order to one expert."""
    folder = os.path.join(golden, "wan-dev")
    model, cfg = load_model(WanTransformer3DModel, os.path.join(folder, component))
    gen = torch.Generator().manual_seed(seed)
    files, changed, lmeta = {}, set(), []
    for i, (layout, strength) in enumerate(loras):
        fname = f"lora{i}.safetensors"
        if layout == "original":
            sd = wan_original_lora(model, gen, cfg["num_layers"])
            # The converters scale some factors in place: they get copies, the file the originals.
            conv, dtype = _convert_non_diffusers_wan_lora_to_diffusers({k: v.clone() for k, v in sd.items()}), "bf16"
        elif layout == "kohya":
            sd = wan_musubi_lora(model, gen, cfg["num_layers"])
            conv, dtype = _convert_musubi_wan_lora_to_diffusers({k: v.clone() for k, v in sd.items()}), "f16"
        else:
            sd = wan_diffusers_lora(model, gen, cfg["num_layers"])
            conv, dtype = {k: v.clone() for k, v in sd.items()}, "f32"
        changed |= peft_fuse(model, conv, strength, "transformer")
        files[fname] = (sd, dtype)
        lmeta.append({"file": fname, "layout": layout, "strength": strength})
    inputs = wan_inputs(folder)
    with torch.no_grad():
        y = model(inputs["hidden_states"], inputs["timestep"], inputs["encoder_hidden_states"], return_dict=False)[0]
    save_case(out, name, files, changed, model, inputs, y, {
        "model": "wan-dev", "component": component, "loras": lmeta,
        "call": "transformer(hidden_states, timestep, encoder_hidden_states, return_dict=False)[0] with the fused weights",
        "conversion": "diffusers' _convert_non_diffusers_wan_lora_to_diffusers / _convert_musubi_wan_lora_to_diffusers executed; PEFT's merge W += (B @ A) * s, b += lora_B.bias * s written out"})


def svd_case(golden, out, name, layout, strength, seed):
    folder = os.path.join(golden, "dev")
    model, cfg = load_model(UNetSpatioTemporalConditionModel, os.path.join(folder, "unet"))
    gen = torch.Generator().manual_seed(seed)
    p = dict(model.named_parameters())
    targets = ["down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q",
               "down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k",
               "down_blocks.0.attentions.0.temporal_transformer_blocks.0.attn1.to_v",
               "down_blocks.0.attentions.0.transformer_blocks.0.ff.net.0.proj",
               "mid_block.attentions.0.transformer_blocks.0.attn1.to_out.0",
               "down_blocks.0.resnets.0.spatial_res_block.conv1",
               "up_blocks.1.attentions.0.proj_in"]
    sd = {}
    for t in targets:
        w = p[t + ".weight"]
        down, up = factors(gen, w.shape[0], w.shape[1:])
        if w.dim() == 4:
            up = up.reshape(w.shape[0], RANK, 1, 1)  # a convolution's up factor is a 1x1 conv
        if layout == "diffusers":
            sd[f"unet.{t}.lora_A.weight"], sd[f"unet.{t}.lora_B.weight"] = down, up
        else:
            k = "lora_unet_" + t.replace(".", "_")
            sd[k + ".lora_down.weight"], sd[k + ".lora_up.weight"], sd[k + ".alpha"] = down, up, torch.tensor(2.0)
    changed = explicit_fuse(model, sd, strength, layout)
    case = read_safetensors(os.path.join(folder, "cases", "unet_forward", "inputs.safetensors"))
    inputs = {k: torch.from_numpy(v) for k, v in case.items()}
    args = json.load(open(os.path.join(folder, "cases", "unet_forward", "case.json")))["args"]
    t = torch.tensor([args["timestep"]], dtype=torch.float32)
    ids = torch.tensor(args["added_time_ids"], dtype=torch.float32)
    inputs["timestep"], inputs["added_time_ids"] = t, ids
    with torch.no_grad():
        y = model(inputs["sample"], t, inputs["encoder_hidden_states"], ids, return_dict=False)[0]
    save_case(out, name, {"lora0.safetensors": (sd, "f32")}, changed, model, inputs, y, {
        "model": "dev", "component": "unet", "loras": [{"file": "lora0.safetensors", "layout": layout, "strength": strength}],
        "call": "unet(sample, timestep, encoder_hidden_states, added_time_ids, return_dict=False)[0] with the fused weights",
        "conversion": "W += s * (alpha / r) * (up @ down) on the UNet's module names (diffusers has no SVD LoRA loader)"})


def main():
    golden, out = sys.argv[1], sys.argv[2]
    import diffusers
    assert diffusers.__version__ == "0.35.2", diffusers.__version__
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    wan_case(golden, out, "lora_wan_original", [("original", 0.8)], seed=1)
    wan_case(golden, out, "lora_wan_kohya", [("kohya", 1.0)], seed=2)
    wan_case(golden, out, "lora_wan_diffusers", [("diffusers", 1.3)], seed=3)
    wan_case(golden, out, "lora_wan_two", [("original", 0.5), ("diffusers", -0.7)], seed=4)
    wan_case(golden, out, "lora_wan_expert2", [("original", 1.0)], component="transformer_2", seed=5)
    svd_case(golden, out, "lora_svd_diffusers", "diffusers", 0.9, seed=6)
    svd_case(golden, out, "lora_svd_kohya", "kohya", 1.1, seed=7)


if __name__ == "__main__":
    main()
