#!/usr/bin/env bash
# tokenizer-bench.sh: strings/s of vdpp's SentencePiece tokenizer (Go) against
# python3-sentencepiece (Debian's, C++ underneath) on the same corpus and
# models, one thread each (GOMAXPROCS=1), in one run; rates per wall second
# and per CPU second (the latter is steadier on a shared machine). docs/text.md records the numbers.
#
# Usage: scripts/tokenizer-bench.sh [MODEL...]
#   default models: the parity models in text/sentencepiece/testdata/models
#   CORPUS=text/sentencepiece/testdata/strings.json.gz  MIN=3 (seconds per measurement)
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${CORPUS:-text/sentencepiece/testdata/strings.json.gz}
MIN=${MIN:-3}
MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then
  MODELS=(text/sentencepiece/testdata/models/nfkc_4000_t5ids.model text/sentencepiece/testdata/models/nmt_nfkc_8000.model)
fi
bin=$(mktemp -d)/tokenizer-bench
go build -o "$bin" ./scripts/tokenizer-bench
for m in "${MODELS[@]}"; do
  /usr/bin/python3 - "$m" "$CORPUS" "$MIN" <<'PY'
import gzip, json, sys, time
import sentencepiece as spm
model, corpus, min_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
strings = json.load(gzip.open(corpus, "rt"))["strings"]
sp = spm.SentencePieceProcessor(model_file=model)
enc = sp.EncodeAsIds
for s in strings:
    enc(s)
n = ids = 0
t0, c0 = time.perf_counter(), time.process_time()
while time.perf_counter() - t0 < min_s:
    for s in strings:
        ids += len(enc(s))
    n += len(strings)
dt, dc = time.perf_counter() - t0, time.process_time() - c0
print(f"python  {model:50s} {n / dt:9.0f} strings/s {ids / dt:10.0f} ids/s  per CPU second: {n / dc:9.0f} strings/s"
      f"  (sentencepiece {spm.__version__})")
PY
  GOMAXPROCS=1 "$bin" -model "$m" -corpus "$CORPUS" -min "$MIN"
done
