#!/usr/bin/python3
"""Reference outputs for vdpp's model/umt5, from transformers' own UMT5EncoderModel.

Runs transformers' modeling_umt5.py (with configuration_umt5.py and activations.py from the
same source tree) on Debian's CPU PyTorch. transformers is not installed here: the three files
are copied from --transformers SRC (a checkout's src/transformers) into a temporary package
whose other modules are import-only shims (no math: containers, decorators, empty classes).
The prompt pass executes diffusers' WanPipeline._get_t5_prompt_embeds and prompt_clean,
taken from --diffusers FILE (pipelines/wan/pipeline_wan.py) by their source text, with a
fake tokenizer (the Go test has the same one) and ftfy.fix_text as the identity (the test
prompts are ones ftfy leaves unchanged).

Usage: /usr/bin/python3 reference.py --transformers SRC --diffusers PIPELINE_WAN_PY [--out DIR]
Writes DIR/<case>/{config.json, weights, inputs.safetensors, outputs.safetensors} and
DIR/buckets.json. No file of transformers or diffusers is written to DIR.
"""
import argparse
import ast
import html
import json
import os
import re
import shutil
import sys
import tempfile
import types

import torch


def save_file(tensors, path):
    """Writes a safetensors file (the safetensors package is not installed here)."""
    codes = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
    header, blobs, off = {}, [], 0
    for k in sorted(tensors):
        t = tensors[k].contiguous()
        raw = (t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t).numpy().tobytes()
        header[k] = {"dtype": codes[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))

SHIMS = {
    "__init__.py": "",
    "utils/__init__.py": '''
import logging as _logging
class _Logger(_logging.Logger):
    def warning_once(self, *a, **k): pass
_logging.setLoggerClass(_Logger)
class logging:
    @staticmethod
    def get_logger(name): return _logging.getLogger(name)
DUMMY_INPUTS = [[7, 6, 0, 0, 1], [1, 2, 3, 0, 0], [0, 0, 0, 4, 5]]
DUMMY_MASK = [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 0, 0, 1, 1]]
def auto_docstring(obj=None, **kw):
    return obj if obj is not None else (lambda o: o)
def is_torch_flex_attn_available(): return False
def is_torch_fx_proxy(x): return False
def is_torchdynamo_compiling(): return False
''',
    "utils/import_utils.py": "def is_torchdynamo_compiling(): return False\n",
    "utils/deprecation.py": "def deprecate_kwarg(*a, **k):\n    return lambda f: f\n",
    "cache_utils.py": "class Cache: pass\nclass DynamicCache(Cache): pass\nclass EncoderDecoderCache(Cache): pass\nclass StaticCache(Cache): pass\n",
    "generation/__init__.py": "class GenerationMixin: pass\n",
    "modeling_attn_mask_utils.py": "class AttentionMaskConverter: pass\n",
    "modeling_layers.py": "from torch import nn\nclass GradientCheckpointingLayer(nn.Module): pass\n",
    "onnx/__init__.py": "class OnnxSeq2SeqConfigWithPast: pass\n",
    "modeling_outputs.py": '''
class _Out(dict):
    def __init__(self, **kw):
        super().__init__(kw)
        self.__dict__.update(kw)
    def __getitem__(self, k):
        if isinstance(k, int):
            return [v for v in self.values() if v is not None][k]
        return dict.__getitem__(self, k)
BaseModelOutput = BaseModelOutputWithPastAndCrossAttentions = Seq2SeqLMOutput = Seq2SeqModelOutput = _Out
Seq2SeqQuestionAnsweringModelOutput = Seq2SeqSequenceClassifierOutput = TokenClassifierOutput = _Out
''',
    "configuration_utils.py": '''
class PretrainedConfig:
    def __init__(self, **kwargs):
        self.output_attentions = False
        self.output_hidden_states = False
        self.use_return_dict = True
        self.is_decoder = kwargs.pop("is_decoder", False)
        self._attn_implementation = "eager"
        for k, v in kwargs.items():
            setattr(self, k, v)
''',
    "modeling_utils.py": '''
from torch import nn
class PreTrainedModel(nn.Module):
    def __init__(self, config, *a, **k):
        super().__init__()
        self.config = config
    def post_init(self): pass
    def get_head_mask(self, head_mask, num_hidden_layers):
        assert head_mask is None
        return [None] * num_hidden_layers
''',
}
COPIED = ["models/umt5/modeling_umt5.py", "models/umt5/configuration_umt5.py", "activations.py"]


def import_transformers(src):
    root = tempfile.mkdtemp(prefix="umt5ref")
    pkg = os.path.join(root, "transformers")
    for rel, text in SHIMS.items():
        os.makedirs(os.path.dirname(os.path.join(pkg, rel)), exist_ok=True)
        with open(os.path.join(pkg, rel), "w") as f:
            f.write(text)
    os.makedirs(os.path.join(pkg, "models/umt5"), exist_ok=True)
    open(os.path.join(pkg, "models/__init__.py"), "w").close()
    open(os.path.join(pkg, "models/umt5/__init__.py"), "w").close()
    for rel in COPIED:
        shutil.copy(os.path.join(src, rel), os.path.join(pkg, rel))
    sys.path.insert(0, root)
    from transformers.models.umt5 import configuration_umt5, modeling_umt5
    return configuration_umt5.UMT5Config, modeling_umt5


def diffusers_functions(path):
    """prompt_clean (with its helpers) and WanPipeline._get_t5_prompt_embeds, from source."""
    tree = ast.parse(open(path).read())
    want = {"basic_clean", "whitespace_clean", "prompt_clean"}
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in want]
    for n in tree.body:
        if isinstance(n, ast.ClassDef) and n.name == "WanPipeline":
            nodes += [m for m in n.body if isinstance(m, ast.FunctionDef) and m.name == "_get_t5_prompt_embeds"]
    from typing import List, Optional, Union
    ftfy = types.SimpleNamespace(fix_text=lambda s: s)  # ftfy is not installed; see the docstring
    ns = {"torch": torch, "re": re, "html": html, "ftfy": ftfy, "List": List, "Optional": Optional, "Union": Union}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), path, "exec"), ns)
    return ns["prompt_clean"], ns["_get_t5_prompt_embeds"]


def fake_token_ids(text, vocab):
    """The Go test's fake tokenizer: one id per space-separated word, 2 + (sum of UTF-8 bytes
    times position weights) mod (vocab - 2)."""
    ids = []
    for w in text.split(" "):
        if w == "":
            continue
        h = 0
        for i, b in enumerate(w.encode("utf-8")):
            h = (h * 31 + b) % 1000003
        ids.append(2 + h % (vocab - 2))
    return ids


class SentencePieceTokenizer:
    """T5-style tokenization with python3-sentencepiece: EncodeAsIds, truncated to
    max_length - 1, </s> appended, padded with the pad id."""

    def __init__(self, path):
        import sentencepiece
        self.sp = sentencepiece.SentencePieceProcessor(model_file=path)

    def __call__(self, texts, padding, max_length, truncation, add_special_tokens, return_attention_mask, return_tensors):
        assert padding == "max_length" and truncation and add_special_tokens
        ids, mask = [], []
        for t in texts:
            x = self.sp.EncodeAsIds(t)[: max_length - 1] + [self.sp.eos_id()]
            ids.append(x + [self.sp.pad_id()] * (max_length - len(x)))
            mask.append([1] * len(x) + [0] * (max_length - len(x)))
        return types.SimpleNamespace(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))


class FakeTokenizer:
    def __init__(self, vocab):
        self.vocab = vocab

    def __call__(self, texts, padding, max_length, truncation, add_special_tokens, return_attention_mask, return_tensors):
        assert padding == "max_length" and truncation and add_special_tokens
        ids, mask = [], []
        for t in texts:
            x = fake_token_ids(t, self.vocab)[: max_length - 1] + [1]
            ids.append(x + [0] * (max_length - len(x)))
            mask.append([1] * len(x) + [0] * (max_length - len(x)))
        return types.SimpleNamespace(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))


CASES = [
    # name, config, batch lengths (real tokens per row), seq length, weight storage
    ("small", dict(vocab_size=97, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4,
                   relative_attention_num_buckets=32, relative_attention_max_distance=128), [12, 7], 12, "fp32"),
    ("odd", dict(vocab_size=131, d_model=40, d_kv=12, d_ff=56, num_layers=3, num_heads=3,
                 relative_attention_num_buckets=8, relative_attention_max_distance=12), [37, 20, 1], 37, "fp32"),
    ("wide", dict(vocab_size=64, d_model=24, d_kv=16, d_ff=40, num_layers=1, num_heads=2,
                  relative_attention_num_buckets=16, relative_attention_max_distance=20,
                  layer_norm_epsilon=1e-5), [30], 30, "bf16"),
    # With a real SentencePiece model (text/sentencepiece/testdata/models/nfkc_4000_t5ids.model).
    ("spm", dict(vocab_size=4000, d_model=16, d_kv=8, d_ff=24, num_layers=2, num_heads=2,
                 relative_attention_num_buckets=32, relative_attention_max_distance=128), [9], 9, "fp32"),
    ("sharded", dict(vocab_size=80, d_model=32, d_kv=8, d_ff=64, num_layers=4, num_heads=4,
                     relative_attention_num_buckets=12, relative_attention_max_distance=30), [25, 9], 25, "sharded"),
]

PROMPTS = [
    "a cat   sits\ton the mat",
    "  Tom &amp; Jerry &lt;3 &amp;amp; friends  ",
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three twenty-four twenty-five",
    "",
]


# prompt_clean cases: whitespace of every kind Python's \\s and str.strip know, and HTML
# references (named with and without ';', numeric, invalid, control, double-escaped).
CLEAN = [
    "plain", "  lead and trail  ", "tabs\tand\nnewlines\r\nmixed \x0b\x0c end",
    "seps\x1c\x1d\x1e\x1fhere", "nbsp\xa0nel\x85ogham\u1680en\u2002thin\u2009",
    "line\u2028para\u2029narrow\u202fmath\u205fideo\u3000zwsp\u200bmvs\u180e",
    "&amp; &lt; &gt; &quot; &#39; &apos;", "&amp;amp; double &amp;lt;b&amp;gt;",
    "&ampx &notit; &notin; &copy2026 &unknown; & alone &; &#;",
    "&#65;&#x42;&#X43;&#0067 &#x1F600; &#128512;", "&#0; &#1; &#x7f; &#128; &#x9f; &#xD800; &#x110000; &#xFFFE;",
    "&#99999999999999999999; &#x; &#xZZ; &AElig &AElig; &aelig", "café naïve 日本語 😀 \u00e9\u0301",
    "&nbsp;x&nbsp;", "a&NewLine;b&Tab;c", "\u3000\u3000", "",
]


SPM_PROMPTS = [
    "A red fox runs through the snowy forest at dawn, cinematic lighting.",
    "  Ein Hund &amp; eine Katze spielen im Garten  ",
    "東京の夜景、雨上がりのネオン。 Tokyo at night.",
    "slow motion " * 30,
]


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            elif "relative_attention_bias" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name == "shared.weight":
                p.copy_(torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)


def state_dict(model):
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    sd.pop("encoder.embed_tokens.weight")  # tied to shared.weight; save_pretrained drops it too
    return sd


def write_weights(d, sd, storage):
    if storage == "fp32":
        save_file(sd, os.path.join(d, "model.safetensors"))
    elif storage == "bf16":
        save_file({k: v.to(torch.bfloat16) for k, v in sd.items()}, os.path.join(d, "model.safetensors"))
    else:
        names = sorted(sd)
        shards = [names[0::2], names[1::2]]
        wm = {}
        for i, part in enumerate(shards):
            fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
            save_file({k: sd[k] for k in part}, os.path.join(d, fn))
            wm.update({k: fn for k in part})
        total = sum(v.numel() * 4 for v in sd.values())
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2, sort_keys=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transformers", required=True)
    ap.add_argument("--diffusers", required=True)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--spm-model", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                                        "text", "sentencepiece", "testdata", "models", "nfkc_4000_t5ids.model"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    UMT5Config, modeling = import_transformers(a.transformers)
    prompt_clean, get_t5_prompt_embeds = diffusers_functions(a.diffusers)

    for name, cfg, lens, seq, storage in CASES:
        gen = torch.Generator().manual_seed(sum(map(ord, name)))
        config = UMT5Config(**cfg, feed_forward_proj="gated-gelu", dropout_rate=0.0)
        model = modeling.UMT5EncoderModel(config).eval()
        randomize(model, gen)
        sd = state_dict(model)
        if storage == "bf16":  # the reference computes in fp32 with the stored (rounded) values
            model.load_state_dict({**{k: v.to(torch.bfloat16).float() for k, v in sd.items()},
                                   "encoder.embed_tokens.weight": sd["shared.weight"].to(torch.bfloat16).float()})
        d = os.path.join(a.out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"architectures": ["UMT5EncoderModel"], "model_type": "umt5", **cfg,
                       "feed_forward_proj": "gated-gelu", "dense_act_fn": "gelu_new", "is_gated_act": True,
                       "dropout_rate": 0.0, "pad_token_id": 0, "eos_token_id": 1,
                       "torch_dtype": "bfloat16" if storage == "bf16" else "float32"}, f, indent=2, sort_keys=True)
        write_weights(d, sd, storage)

        ids = torch.zeros(len(lens), seq, dtype=torch.long)
        mask = torch.zeros(len(lens), seq, dtype=torch.long)
        for i, n in enumerate(lens):
            ids[i, :n] = torch.randint(2, cfg["vocab_size"], (n,), generator=gen)
            ids[i, n - 1] = 1
            mask[i, :n] = 1
        with torch.no_grad():
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            tok = FakeTokenizer(cfg["vocab_size"]) if name != "spm" else SentencePieceTokenizer(a.spm_model)
            pipe = types.SimpleNamespace(tokenizer=tok, text_encoder=model, _execution_device=torch.device("cpu"))
            max_len = {"odd": 40, "spm": 48}.get(name, 16)
            prompts = PROMPTS if name != "spm" else SPM_PROMPTS
            embeds = get_t5_prompt_embeds(pipe, prompts, max_sequence_length=max_len,
                                          device=torch.device("cpu"), dtype=torch.float32)
        save_file({"input_ids": ids.float(), "attention_mask": mask.float()}, os.path.join(d, "inputs.safetensors"))
        save_file({"last_hidden_state": hidden.contiguous(), "prompt_embeds": embeds.contiguous()},
                  os.path.join(d, "outputs.safetensors"))
        with open(os.path.join(d, "prompts.json"), "w") as f:
            json.dump({"prompts": prompts, "cleaned": [prompt_clean(p) for p in prompts],
                       "max_sequence_length": max_len}, f, indent=2, ensure_ascii=False)
        print(name, tuple(hidden.shape), "prompt_embeds", tuple(embeds.shape))

    with open(os.path.join(a.out, "clean.json"), "w") as f:
        json.dump([{"in": c, "out": prompt_clean(c)} for c in CLEAN], f, indent=1, ensure_ascii=True)

    # Buckets: relative position -> bucket, via the module's own _relative_position_bucket on the
    # [L, L] grid compute_bias builds.
    buckets = []
    L = 700
    for nb, md in [(32, 128), (8, 12), (16, 20), (12, 30), (4, 3), (64, 1000), (33, 7)]:
        cfg = UMT5Config(relative_attention_num_buckets=nb, relative_attention_max_distance=md)
        att = modeling.UMT5Attention(cfg, has_relative_attention_bias=True)
        pos = torch.arange(L)
        rel = pos[None, :] - pos[:, None]
        b = att._relative_position_bucket(rel)
        table = {}
        for r, v in zip(rel.flatten().tolist(), b.flatten().tolist()):
            assert table.setdefault(r, v) == v
        buckets.append({"num_buckets": nb, "max_distance": md,
                        "buckets": [table[r] for r in range(-(L - 1), L)]})
    with open(os.path.join(a.out, "buckets.json"), "w") as f:
        json.dump({"max_abs_position": L - 1, "cases": buckets}, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
