#!/usr/bin/python3
"""Reference data for Wan prompts end to end: prompt text -> umT5 prompt embeddings.

Builds a tiny text encoder and tokenizer in the diffusers layout of a Wan folder and the
embeddings diffusers' WanPipeline computes from them:

  tokenizer/spiece.model      a unigram SentencePiece model trained here with Debian's spm_train
                              (vocabulary 200, nmt_nfkc, T5's ids: pad 0, eos 1, unk 2, no bos)
  text_encoder/config.json,   transformers' UMT5EncoderModel with random weights (d_model 32, the
  text_encoder/model.safetensors  wan-dev transformer's text_dim)
  prompts.json                the prompts
  embeds.safetensors          prompt_embeds [n, 512, 32]: WanPipeline._get_t5_prompt_embeds run on
                              each prompt alone (as encode_prompt calls it), max_sequence_length 512

The encoder is transformers' own modeling_umt5.py, imported with model/umt5/testdata/reference.py's
shims (import-only, no math); the tokenizer call is T5TokenizerFast's contract executed with
python3-sentencepiece on the same spiece.model (ids + </s>, truncation to max_length keeping </s>,
padding with <pad>, attention mask); _get_t5_prompt_embeds and prompt_clean are executed from
diffusers v0.35.2's pipeline_wan.py source text (ftfy as the identity: the prompts are ones ftfy
leaves unchanged).

Usage:
  git --git-dir=<diffusers mirror> archive v0.35.2 src/diffusers/pipelines/wan/pipeline_wan.py | tar -x -C /tmp/d
  /usr/bin/python3 model/wan/testdata/prompts/reference.py --transformers <transformers>/src/transformers \
      --diffusers /tmp/d/src/diffusers/pipelines/wan/pipeline_wan.py
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
import types

import sentencepiece as spm
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
UMT5_REF = os.path.join(HERE, "..", "..", "..", "umt5", "testdata", "reference.py")

VOCAB = 200
MAX_LEN = 512
CONFIG = dict(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4,
              relative_attention_num_buckets=32, relative_attention_max_distance=128)

# The prompts: a plain one, one with HTML references and extra whitespace (prompt_clean), one
# with characters outside the training text (<unk>), one longer than max_sequence_length
# (truncation keeps </s> last), and the empty negative prompt WanPipeline uses by default.
PROMPTS = [
    "A red fox runs through the snow at dawn",
    "  Two   cats &amp; a dog\tplay in the garden  ",
    "Café ☕ at night, neon lights 東京",
    " ".join(["the quick brown fox jumps over the lazy dog"] * 80),
    "",
]

WORDS = ("a the red blue green fox cat dog bird runs walks flies jumps over under through snow rain "
         "garden city night day dawn light lights camera slow motion close up wide shot of in at on "
         "and with two three ocean forest mountain river car street people dance play sit cinematic "
         "golden hour soft warm cold bright dark quick brown lazy").split()


def training_text(path):
    g = torch.Generator().manual_seed(22)
    with open(path, "w") as f:
        for _ in range(3000):
            n = int(torch.randint(3, 14, (1,), generator=g))
            idx = torch.randint(0, len(WORDS), (n,), generator=g).tolist()
            s = " ".join(WORDS[i] for i in idx)
            f.write(s[0].upper() + s[1:] + ".\n")


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class SpmT5Tokenizer:
    """T5TokenizerFast's call as _get_t5_prompt_embeds makes it, on python3-sentencepiece."""

    def __init__(self, model):
        self.sp = spm.SentencePieceProcessor(model_file=model)
        assert self.sp.pad_id() == 0 and self.sp.eos_id() == 1

    def __call__(self, texts, padding, max_length, truncation, add_special_tokens, return_attention_mask, return_tensors):
        assert padding == "max_length" and truncation and add_special_tokens and return_tensors == "pt"
        ids, mask = [], []
        for t in texts:
            x = self.sp.encode(t)[: max_length - 1] + [self.sp.eos_id()]
            ids.append(x + [self.sp.pad_id()] * (max_length - len(x)))
            mask.append([1] * len(x) + [0] * (max_length - len(x)))
        return types.SimpleNamespace(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transformers", required=True)
    ap.add_argument("--diffusers", required=True)
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args()
    torch.set_num_threads(1)
    ref = load_module(UMT5_REF, "umt5_reference")
    UMT5Config, modeling = ref.import_transformers(a.transformers)
    prompt_clean, get_t5_prompt_embeds = ref.diffusers_functions(a.diffusers)

    tok_dir = os.path.join(a.out, "tokenizer")
    enc_dir = os.path.join(a.out, "text_encoder")
    for d in (tok_dir, enc_dir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "train.txt")
        training_text(text)
        subprocess.run(["spm_train", "--input=" + text, "--model_prefix=" + os.path.join(tmp, "spiece"),
                        "--model_type=unigram", "--vocab_size=%d" % VOCAB, "--character_coverage=1.0",
                        "--normalization_rule_name=nmt_nfkc", "--pad_id=0", "--eos_id=1", "--unk_id=2",
                        "--bos_id=-1", "--num_threads=1", "--minloglevel=2"], check=True)
        shutil.copy(os.path.join(tmp, "spiece.model"), os.path.join(tok_dir, "spiece.model"))
    tokenizer = SpmT5Tokenizer(os.path.join(tok_dir, "spiece.model"))

    gen = torch.Generator().manual_seed(2222)
    config = UMT5Config(**CONFIG, feed_forward_proj="gated-gelu", dropout_rate=0.0)
    model = modeling.UMT5EncoderModel(config).eval()
    ref.randomize(model, gen)
    with open(os.path.join(enc_dir, "config.json"), "w") as f:
        json.dump({"architectures": ["UMT5EncoderModel"], "model_type": "umt5", **CONFIG,
                   "feed_forward_proj": "gated-gelu", "dense_act_fn": "gelu_new", "is_gated_act": True,
                   "dropout_rate": 0.0, "pad_token_id": 0, "eos_token_id": 1, "torch_dtype": "float32"},
                  f, indent=2, sort_keys=True)
    ref.write_weights(enc_dir, ref.state_dict(model), "fp32")

    pipe = types.SimpleNamespace(tokenizer=tokenizer, text_encoder=model, _execution_device=torch.device("cpu"))
    rows, lengths = [], []
    with torch.no_grad():
        for p in PROMPTS:
            e = get_t5_prompt_embeds(pipe, p, max_sequence_length=MAX_LEN, device=torch.device("cpu"), dtype=torch.float32)
            rows.append(e[0])
            lengths.append(int(tokenizer([prompt_clean(p)], "max_length", MAX_LEN, True, True, True, "pt").attention_mask.sum()))
    ref.save_file({"prompt_embeds": torch.stack(rows).contiguous()}, os.path.join(a.out, "embeds.safetensors"))
    with open(os.path.join(a.out, "prompts.json"), "w") as f:
        json.dump({"prompts": PROMPTS, "cleaned": [prompt_clean(p) for p in PROMPTS], "tokens": lengths,
                   "max_sequence_length": MAX_LEN}, f, indent=2, ensure_ascii=False)
    print("prompt_embeds", tuple(torch.stack(rows).shape), "tokens", lengths)


if __name__ == "__main__":
    main()
