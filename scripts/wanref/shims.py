"""Shims that let diffusers v0.35.2 import and run on Debian's torch 1.13 (python3-torch).

Only names torch 1.13 lacks are added, and Python packages diffusers imports but never
calls on this path (huggingface_hub, filelock, ...) are stubbed for import; no diffusers
code is changed and no math is altered:
  - F.scaled_dot_product_attention: the exact softmax(q·kᵀ/√d)·v (no mask/dropout used);
  - torch.nn.RMSNorm: x·rsqrt(mean(x²)+eps)·weight;
  - torch.float8_* dtypes and torch.compiler: import-only names;
  - packaging.version, when packaging is not installed: release-number comparisons only.
"""
import importlib.abc
import importlib.machinery
import math
import sys
import types

import torch
import torch.nn.functional as F

SHIMS = []


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
    assert attn_mask is None and not is_causal and dropout_p == 0.0
    s = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    w = torch.softmax(torch.matmul(query, key.transpose(-2, -1)) * s, dim=-1)
    return torch.matmul(w, value)


class _RMSNorm(torch.nn.Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = torch.nn.Parameter(torch.ones(self.normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        dims = tuple(range(-len(self.normalized_shape), 0))
        y = x * torch.rsqrt(x.pow(2).mean(dim=dims, keepdim=True) + eps)
        return y * self.weight if self.weight is not None else y


def _add(obj, name, value, label):
    if not hasattr(obj, name):
        setattr(obj, name, value)
        SHIMS.append(label)


_add(F, "scaled_dot_product_attention", _sdpa, "torch.nn.functional.scaled_dot_product_attention")
_add(torch.nn, "RMSNorm", _RMSNorm, "torch.nn.RMSNorm")
for _n in ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]:
    _add(torch, _n, torch.float16, "torch." + _n)
if not hasattr(torch, "compiler"):
    torch.compiler = types.SimpleNamespace(is_compiling=lambda: False, disable=lambda *a, **k: (lambda f: f))
    sys.modules["torch.compiler"] = torch.compiler
    SHIMS.append("torch.compiler")


class _Stub:
    """Anything: a callable, subclassable, attribute-rich placeholder for import-only names."""

    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Stub()

    def __getattr__(self, name):
        return _Stub()

    def __mro_entries__(self, bases):
        return (object,)

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False


class _StubModule(types.ModuleType):
    __path__ = []

    def __getattr__(self, name):
        if name == "__version__":
            return "0.0.0"  # diffusers compares it at import time (PIL: the pre-9.1 names)
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if name.isupper():
            return "/nonexistent/stub"  # constants such as HF_HOME: paths never opened here
        if name[:1].isupper():
            return type(name, (), {"__init__": lambda self, *a, **k: None})
        return _Stub()


STUBBED = ("huggingface_hub", "filelock", "requests", "regex", "importlib_metadata", "PIL", "safetensors", "tqdm", "yaml", "packaging")


class _Version:
    """packaging.version.Version for release numbers only ("1.13.0a0" compares as 1.13.0):
    diffusers compares versions at import time, so a stub that cannot compare breaks it."""

    def __init__(self, text):
        import re
        self.release = tuple(int(x) for x in re.findall(r"\d+", str(text).split("+")[0])[:3]) or (0,)
        self.base_version = ".".join(str(x) for x in self.release)

    def _key(self):
        return self.release + (0,) * (3 - len(self.release))

    def __lt__(self, o): return self._key() < o._key()
    def __le__(self, o): return self._key() <= o._key()
    def __gt__(self, o): return self._key() > o._key()
    def __ge__(self, o): return self._key() >= o._key()
    def __eq__(self, o): return self._key() == o._key()
    def __hash__(self): return hash(self._key())
    def __str__(self): return self.base_version


if importlib.machinery.PathFinder.find_spec("packaging") is None:
    _pk = types.ModuleType("packaging")
    _pk.__path__ = []
    _pv = types.ModuleType("packaging.version")
    _pv.Version, _pv.parse = _Version, _Version
    _pk.version = _pv
    sys.modules["packaging"], sys.modules["packaging.version"] = _pk, _pv
    SHIMS.append("packaging.version (release numbers only)")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        root = name.split(".")[0]
        if root in STUBBED and importlib.machinery.PathFinder.find_spec(root) is None:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        SHIMS.append("import stub " + module.__name__)


sys.meta_path.append(_Finder())

import importlib.metadata as _md  # noqa: E402

_real_version = _md.version


def _version(name):
    try:
        return _real_version(name)
    except _md.PackageNotFoundError:
        if name.split(".")[0].replace("-", "_").lower() in STUBBED:
            return "99.0.0"  # import stub: only diffusers' install-time version check reads it
        raise


_md.version = _version
