#!/usr/bin/python3
"""Reference for model/svd/vae's spatial tiling: diffusers v0.35.2 AutoencoderKL's
tiled_decode, _tiled_encode, blend_v and blend_h, executed.

diffusers' AutoencoderKLTemporalDecoder (SVD's VAE) has no tiling; vdpp tiles it with
AutoencoderKL's scheme. This script runs those four methods, taken unmodified from
autoencoder_kl.py (by name, with ast), on a stand-in object whose decoder and encoder are
simple exact functions of a tile that depend on the tile's size (so edge tiles differ and
the blending shows): the decoder upsamples ×2 (nearest) and adds 10·h + w of the tile, the
encoder takes every other pixel into both halves of the moments and adds 10·h + w. The Go
test applies the same functions through vae.tiled and compares.

    git --git-dir="$DIFFUSERS_GIT_DIR" archive v0.35.2 src/diffusers | tar -x -C /tmp/d
    /usr/bin/python3 scripts/svd_tiled_vae_reference.py --diffusers /tmp/d/src/diffusers --out model/svd/vae/testdata/tiling.safetensors
"""

import argparse
import ast
import json
import os
import struct
import types

import numpy as np
import torch


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


def autoencoder_kl_methods(diffusers_dir):
    path = os.path.join(diffusers_dir, "models/autoencoders/autoencoder_kl.py")
    tree = ast.parse(open(path).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AutoencoderKL")
    want = {"blend_v", "blend_h", "tiled_decode", "_tiled_encode"}
    body = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in want]
    assert {n.name for n in body} == want
    mod = ast.Module(body=[ast.ClassDef(name="Tiling", bases=[], keywords=[], body=body, decorator_list=[])],
                     type_ignores=[])
    ast.fix_missing_locations(mod)
    env = {"torch": torch, "Union": object, "DecoderOutput": None}
    import typing
    env["Union"] = typing.Union
    env["DecoderOutput"] = torch.Tensor
    exec(compile(mod, path, "exec"), env)
    return env["Tiling"]


def size_offset(t):
    return float(10 * t.shape[2] + t.shape[3])


def stand_in(Tiling, sample, latent, overlap):
    o = Tiling()
    o.tile_sample_min_size, o.tile_latent_min_size, o.tile_overlap_factor = sample, latent, overlap
    o.config = types.SimpleNamespace(use_post_quant_conv=False, use_quant_conv=False)
    o.decoder = lambda z: torch.repeat_interleave(torch.repeat_interleave(z, 2, dim=2), 2, dim=3) + size_offset(z)
    o.encoder = lambda x: torch.cat([x[:, :, ::2, ::2], x[:, :, ::2, ::2]], dim=1) + size_offset(x)
    return o


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--diffusers", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    Tiling = autoencoder_kl_methods(a.diffusers)
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2, 3, 13, 10, generator=g)      # latents: 2 frames, 3 channels
    x = torch.randn(2, 3, 26, 20, generator=g)      # images
    out = {"latents": z, "image": x}
    for sample, overlap in [(8, 0.25), (12, 0.25), (8, 0.5)]:
        o = stand_in(Tiling, sample, sample // 2, overlap)
        out[f"decode_{sample}_{overlap}"] = o.tiled_decode(z.clone(), return_dict=False)[0]
        out[f"encode_{sample}_{overlap}"] = o._tiled_encode(x.clone())
    write_safetensors(a.out, out)
    print({k: list(v.shape) for k, v in out.items()})


if __name__ == "__main__":
    main()
