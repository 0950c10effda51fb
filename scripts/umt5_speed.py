#!/usr/bin/python3
"""PyTorch CPU side of scripts/umt5-speed.sh: times transformers' UMT5EncoderModel
(loaded as model/umt5/testdata/reference.py does) on the golden cases' inputs and on a
bigger random config it writes to --out, at the shapes BenchmarkForward uses."""
import argparse
import json
import os
import re
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model", "umt5", "testdata"))
import reference  # noqa: E402


def load_case(modeling, UMT5Config, d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    keep = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_heads", "relative_attention_num_buckets",
            "relative_attention_max_distance", "layer_norm_epsilon", "feed_forward_proj")
    model = modeling.UMT5EncoderModel(UMT5Config(**{k: cfg[k] for k in keep if k in cfg}, dropout_rate=0.0)).eval()
    return model


def timed(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transformers", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    UMT5Config, modeling = reference.import_transformers(a.transformers)
    testdata = os.path.dirname(reference.__file__)
    rows = []
    with torch.no_grad():
        for name, _, lens, seq, _ in reference.CASES:
            model = load_case(modeling, UMT5Config, os.path.join(testdata, name))
            ids = torch.full((len(lens), seq), 2)
            mask = torch.ones(len(lens), seq, dtype=torch.long)
            rows.append(("%s/B%dxL%d" % (name, len(lens), seq), timed(lambda: model(input_ids=ids, attention_mask=mask), a.reps)))

        cfg = dict(vocab_size=4096, d_model=512, d_kv=64, d_ff=1024, num_layers=8, num_heads=8,
                   relative_attention_num_buckets=32, relative_attention_max_distance=128)
        model = modeling.UMT5EncoderModel(UMT5Config(**cfg, feed_forward_proj="gated-gelu", dropout_rate=0.0)).eval()
        reference.randomize(model, torch.Generator().manual_seed(1))
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "config.json"), "w") as f:
            json.dump({"model_type": "umt5", **cfg, "feed_forward_proj": "gated-gelu"}, f)
        reference.write_weights(a.out, reference.state_dict(model), "fp32")
        for l in (512, 64):
            ids = torch.tensor([[2 + j % 50 for j in range(l)]])
            mask = torch.ones(1, l, dtype=torch.long)
            rows.append(("%s/B1xL%d" % (os.path.basename(a.out.rstrip("/")), l),
                         timed(lambda: model(input_ids=ids, attention_mask=mask), 2)))
    blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    print("torch %s, %d threads, BLAS_INFO=%s" % (torch.__version__, torch.get_num_threads(), blas.group(1) if blas else "?"))
    for name, s in rows:
        print("%-28s %10.3f ms" % (name, 1e3 * s))


if __name__ == "__main__":
    main()
