"""Reference cases for vdpp's WanTransformer3DModel port, made by executing diffusers v0.35.2
on Debian's CPU PyTorch 1.13 (/usr/bin/python3) with the shims of shims.py only.

Each case is a config the wan-dev golden folder does not cover (head counts and dims,
including one whose rotary split hits diffusers' two-split quirk, layers, patch sizes that
drop trailing frames, non-square latents, more frames, per-token timesteps, the I2V branch
with pos_embed). Weights are random (0.02·N(0,1), norm weights 1 + 0.1·N(0,1)), rounded to
fp16 and stored as the fp16 variant, so the Go side also exercises fp16 loading. outputs
holds the transformer output and the per-token rotary tables (rope_cos, rope_sin [tokens,
head_dim]) that WanRotaryPosEmbed.forward returns.

    /usr/bin/python3 scripts/wanref/transformer_cases.py model/wan/transformer/testdata/ref
"""
import json
import os
import sys

import numpy as np

from common import import_diffusers, write_safetensors

SHIMS = import_diffusers()
import torch  # noqa: E402
from diffusers.models.transformers.transformer_wan import WanTransformer3DModel  # noqa: E402

BASE = dict(patch_size=[1, 2, 2], num_attention_heads=2, attention_head_dim=8, in_channels=4,
            out_channels=4, text_dim=16, freq_dim=16, ffn_dim=32, num_layers=1, cross_attn_norm=True,
            qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None, added_kv_proj_dim=None,
            rope_max_seq_len=1024, pos_embed_seq_len=None)

CASES = {
    # head dim 64: rotary tables built 24/20/20, read 22/21/21 (d mod 6 = 4); h != w; out != in.
    "hd64_nonsquare": dict(cfg=dict(num_attention_heads=2, attention_head_dim=64, num_layers=1,
                                           in_channels=5, out_channels=3, ffn_dim=48, freq_dim=32),
                                  latent=[5, 6, 10], batch=2, text_len=7, timesteps=[999.0, 3.25]),
    # patch (2, 2, 1): 7 frames give 3 patches (one frame dropped, as the strided conv drops it);
    # no cross_attn_norm; 4 heads x 12; more frames.
    "patch221_frames7": dict(cfg=dict(patch_size=[2, 2, 1], num_attention_heads=4, attention_head_dim=12,
                                      num_layers=3, cross_attn_norm=False, eps=1e-5),
                             latent=[7, 4, 6], batch=1, text_len=5, timesteps=[500.0]),
    # expand_timesteps: one t per token (Wan 2.2 TI2V), head dim 30 (10/10/10), 9 frames.
    "per_token_timesteps": dict(cfg=dict(num_attention_heads=2, attention_head_dim=30, num_layers=2),
                                latent=[9, 4, 6], batch=2, text_len=4, per_token=True),
    # I2V branch with pos_embed (first-last-frame): two image rows per sample, 512 text rows.
    "i2v_pos_embed": dict(cfg=dict(in_channels=12, image_dim=6, added_kv_proj_dim=16, pos_embed_seq_len=6,
                                   num_layers=2),
                          latent=[2, 4, 4], batch=2, text_len=512, image_tokens=3, image_rows=4,
                          timesteps=[871.0, 120.5]),
}


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen)
            if name.endswith("norm_q.weight") or name.endswith("norm_k.weight") or ".norm" in name and name.endswith("weight"):
                v = 1 + 0.1 * r
            else:
                v = 0.02 * r if p.dim() > 1 else 0.1 * r
            p.copy_(v.half().float())  # fp16-exact, stored as the fp16 variant


def main(out):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for i, (name, c) in enumerate(sorted(CASES.items())):
        cfg = dict(BASE, **c["cfg"])
        gen = torch.Generator().manual_seed(1000 + i)
        model = WanTransformer3DModel(**cfg).eval()
        randomize(model, gen)
        b = c["batch"]
        f, h, w = c["latent"]
        hidden = torch.randn((b, cfg["in_channels"], f, h, w), generator=gen)
        text = torch.randn((b, c["text_len"], cfg["text_dim"]), generator=gen)
        text[:, c["text_len"] * 2 // 3:] = 0  # UMT5-style zero padding rows
        pt, ph, pw = cfg["patch_size"]
        tokens = (f // pt) * (h // ph) * (w // pw)
        if c.get("per_token"):
            t = torch.rand((b, tokens), generator=gen) * 1000
            t[:, : (h // ph) * (w // pw)] = 0  # first latent frame clean, as TI2V does
        else:
            t = torch.tensor(c["timesteps"], dtype=torch.float32)
        inputs = {"hidden_states": hidden, "timestep": t, "encoder_hidden_states": text}
        kw = {}
        if cfg["image_dim"]:
            img = torch.randn((c["image_rows"], c["image_tokens"], cfg["image_dim"]), generator=gen)
            inputs["encoder_hidden_states_image"] = img
            kw["encoder_hidden_states_image"] = img
        with torch.no_grad():
            y = model(hidden, t, text, return_dict=False, **kw)[0]
            rope_cos, rope_sin = (r.reshape(tokens, -1) for r in model.rope(hidden))
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        conf = dict(cfg, _class_name="WanTransformer3DModel", _diffusers_version="0.35.2")
        with open(os.path.join(d, "config.json"), "w") as fh:
            json.dump(conf, fh, indent=2, sort_keys=True)
        write_safetensors(os.path.join(d, "diffusion_pytorch_model.fp16.safetensors"),
                          {k: v.detach().half().numpy() for k, v in model.state_dict().items()})
        write_safetensors(os.path.join(d, "inputs.safetensors"), {k: v.numpy().astype(np.float32) for k, v in inputs.items()})
        write_safetensors(os.path.join(d, "outputs.safetensors"), {"output": y.numpy(), "rope_cos": rope_cos.numpy(), "rope_sin": rope_sin.numpy()})
        meta = {"case": "transformer_forward", "name": name, "diffusers": "v0.35.2", "torch": torch.__version__,
                "shims": sorted(set(s for s in SHIMS if not s.startswith("import stub"))),
                "call": "transformer(hidden_states, timestep, encoder_hidden_states[, encoder_hidden_states_image=...], return_dict=False)[0]",
                "weights_variant": "fp16", "shapes": {k: list(v.shape) for k, v in inputs.items()},
                "output_shape": list(y.shape)}
        with open(os.path.join(d, "case.json"), "w") as fh:
            json.dump(meta, fh, indent=2, sort_keys=True)
        print(name, "output", list(y.shape), "rms %.4f" % y.pow(2).mean().sqrt().item())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "model/wan/transformer/testdata/ref")
