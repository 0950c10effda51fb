"""Helpers shared by the Wan reference scripts: the diffusers source tree and safetensors I/O.

The diffusers source (v0.35.2) comes from one of, in this order:
  DIFFUSERS_SRC=/path/to/diffusers/src   a checkout's src folder (holding diffusers/), or
  DIFFUSERS_GIT_DIR=/path/to/diffusers.git   a git clone or mirror of
      https://github.com/huggingface/diffusers, whose tag v0.35.2 is extracted once into
      $TMPDIR/vdpp-diffusers-v0.35.2.
A script run with neither stops with one line saying so.
"""
import json
import os
import subprocess
import sys

import numpy as np

TAG = "v0.35.2"


def diffusers_src():
    """The folder holding the diffusers package: $DIFFUSERS_SRC, or tag TAG of the git
    repository $DIFFUSERS_GIT_DIR extracted into a cache folder."""
    src = os.environ.get("DIFFUSERS_SRC")
    if src:
        if not os.path.isdir(os.path.join(src, "diffusers")):
            sys.exit("DIFFUSERS_SRC=%s holds no diffusers/ package folder" % src)
        return src
    git_dir = os.environ.get("DIFFUSERS_GIT_DIR")
    if not git_dir:
        sys.exit("set DIFFUSERS_SRC to diffusers' src folder, or DIFFUSERS_GIT_DIR to a git clone of "
                 "https://github.com/huggingface/diffusers (tag %s is used)" % TAG)
    cache = os.path.join(os.environ.get("TMPDIR", "/tmp"), "vdpp-diffusers-" + TAG)
    if not os.path.isdir(os.path.join(cache, "src", "diffusers")):
        os.makedirs(cache, exist_ok=True)
        arch = subprocess.run(["git", "--git-dir=" + git_dir, "archive", TAG, "src/diffusers"],
                              check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", cache], input=arch, check=True)
    return os.path.join(cache, "src")


def import_diffusers():
    """Installs the shims and puts diffusers v0.35.2 on sys.path; returns the shim list."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import shims  # noqa: F401
    sys.path.insert(0, diffusers_src())
    return shims.SHIMS


_DT = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("float64"): "F64"}


def write_safetensors(path, tensors):
    """Writes {name: np.ndarray} as a standard safetensors file (sorted keys, 8-byte padded)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _DT[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


_NP = {v: k for k, v in _DT.items()}
_NP["BF16"] = None


def read_safetensors(path):
    """Reads a safetensors file into {name: np.ndarray} (F32, F16, F64; BF16 widened to F32)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        if e["dtype"] == "BF16":
            raw = np.frombuffer(data[lo:hi], dtype="<u2").astype(np.uint32) << 16
            out[name] = raw.view(np.float32).reshape(e["shape"])
        else:
            out[name] = np.frombuffer(data[lo:hi], dtype=_NP[e["dtype"]].newbyteorder("<")).reshape(e["shape"]).copy()
    return out
