"""Import shims that let diffusers v0.35.2's scheduler modules load on Debian's python3-torch 1.13.

Only names are added; no diffusers code is changed and no math is touched:
  - torch.float8_* dtypes and torch.compiler, which torch 1.13 lacks (import-time references only);
  - import-only stand-ins for packages Debian does not ship (huggingface_hub, safetensors, ...),
    which the schedulers import through diffusers.utils / configuration_utils but never call.
"""
import importlib.abc
import importlib.machinery
import sys
import types

import torch

for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if not hasattr(torch, _name):
        setattr(torch, _name, torch.float32)
if not hasattr(torch, "compiler"):
    torch.compiler = types.SimpleNamespace(disable=lambda *a, **k: (lambda f: f), is_compiling=lambda: False)

_STUBBED = ("huggingface_hub", "safetensors", "filelock", "tqdm")


class _Anything(type):
    """A class whose every attribute is another stand-in: import-only names."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})

    def __call__(cls, *a, **k):
        # Used as a decorator at import time (e.g. @validate_hf_hub_args): pass the function through.
        if len(a) == 1 and not k and callable(a[0]):
            return a[0]
        return _Anything(cls.__name__, (), {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "HF_HOME":
            return "/nonexistent"
        return _Anything(name, (), {})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in _STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        m.__version__ = "0.0.0"
        return m

    def exec_module(self, module):
        pass


sys.meta_path.append(_StubFinder())

# diffusers checks installed package metadata (requests, filelock) at import time; the stand-ins
# above have none, so that install check is replaced by a no-op.
_check = types.ModuleType("diffusers.dependency_versions_check")
_check.dep_version_check = lambda pkg, hint=None: None
sys.modules["diffusers.dependency_versions_check"] = _check
