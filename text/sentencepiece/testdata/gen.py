#!/usr/bin/python3
"""Generates the sentencepiece parity data: trains small unigram models with
the reference (Debian's python3-sentencepiece, which wraps spm_train), writes
tokenizer.json conversions of some, a corpus of test strings and the ids the
reference's EncodeAsIds / DecodeIds give for each.

Run from this folder with /usr/bin/python3 gen.py (deterministic for a given
sentencepiece version; writes models/, strings.json.gz, golden/).
"""
import base64, gzip, json, os, random, struct, sys, tempfile

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20261125)

# ---------------------------------------------------------------- corpus
def syllables(cons, vows, n):
    return [rng.choice(cons) + rng.choice(vows) for _ in range(n)]

LATIN = syllables(list("bcdfghjklmnprstvwz") + ["ch", "sh", "th", "qu"], list("aeiou") + ["ä", "é", "ö", "ü", "ñ", "ou", "ea"], 60)
CYRILLIC = syllables(list("бвгджзклмнпрстфхцчшщ"), list("аеёиоуыэюя"), 60)
ARABIC = syllables(list("بتثجحخدذرزسشصضطظعغفقكلمنهو"), ["ا", "ي", "و", "َ", "ِ", "ُ", ""], 60)
DEVANAGARI = syllables(list("कखगघचछजझटठडढतथदधनपफबभमयरलवशसह"), ["ा", "ि", "ी", "ु", "ू", "े", "ै", "ो", "ौ", "ं", "्", ""], 60)
CJK = [chr(c) for c in range(0x4E00, 0x4E00 + 400)] + [chr(c) for c in range(0x3041, 0x3097)] + [chr(c) for c in range(0x30A1, 0x30FB)]
HANGUL = [chr(c) for c in range(0xAC00, 0xAC00 + 300)]
EMOJI = ["😀", "😂", "🥲", "🎉", "🚀", "❤️", "👍🏽", "👨‍👩‍👧", "🇫🇷", "🐍", "☕", "✨", "🔥", "🙂"]
PUNCT = list(".,;:!?-()\"'«»“”…、。！？")


def word(script):
    if script in ("latin", "cyrillic", "arabic", "devanagari"):
        table = {"latin": LATIN, "cyrillic": CYRILLIC, "arabic": ARABIC, "devanagari": DEVANAGARI}[script]
        w = "".join(rng.choice(table) for _ in range(rng.randint(1, 4)))
        if script == "latin" and rng.random() < 0.15:
            w = w.capitalize()
        return w
    if script == "cjk":
        return "".join(rng.choice(CJK) for _ in range(rng.randint(1, 6)))
    if script == "hangul":
        return "".join(rng.choice(HANGUL) for _ in range(rng.randint(1, 4)))
    if script == "digits":
        return str(rng.randint(0, 10 ** rng.randint(1, 7)))
    if script == "emoji":
        return rng.choice(EMOJI)
    raise ValueError(script)


SCRIPTS = ["latin"] * 5 + ["cyrillic"] * 3 + ["arabic"] * 2 + ["devanagari"] * 2 + ["cjk"] * 3 + ["hangul", "digits", "digits", "emoji"]


SMALL_SCRIPTS = ["latin"] * 5 + ["cyrillic"] * 3 + ["digits", "emoji"]


def sentence(scripts=SCRIPTS):
    main = rng.choice(scripts)
    out = []
    for _ in range(rng.randint(3, 18)):
        s = main if rng.random() < 0.7 else rng.choice(scripts)
        out.append(word(s))
        if rng.random() < 0.1:
            out[-1] += rng.choice(PUNCT)
    sep = "" if main == "cjk" and rng.random() < 0.5 else " "
    return sep.join(out)


# ---------------------------------------------------------------- test strings
WEIRD = (
    [chr(c) for c in range(0, 32)] + ["\x7f", "\x85", "\xa0", "\xad", "\u2000", "\u2002", "\u200b", "\u200c", "\u200d",
    "\u2028", "\u2029", "\u202f", "\u3000", "\ufeff", "\ufffd", "\ufffe", "\U0001d400", "\U0001f600", "\U0010fffd",
    "\ue000", "\u0378", "\u2581", "\u2581\u2581", "▁x", "</s>", "<s>", "<unk>", "<pad>", "<0x41>", "<0xZZ>",
    "ﬁ", "ﬂ", "ﬀ", "ﬃ", "ｆｕｌｌｗｉｄｔｈ", "ＡＢＣ１２３", "ｶﾀｶﾅ", "①②③", "㍿", "㌀", "™", "½", "x²", "Ⅻ", "ℌ",
    "e\u0301", "a\u0308\u0323", "\u0301", "\u0301\u0301\u0301", "ñ", "n\u0303", "Å", "A\u030a", "\u1e9b\u0323",
    "한\u1100\u1161", "\u1100\u1161\u11a8", "ǅ", "İ", "ß", "ẞ", "Σ", "ς", "ﷺ", "ﷻ", "\u0644\u0627", "क्षि",
    "\t\t", "\n", "\r\n", " \t \n ", "\u3000\u3000x", "😀\u200d😀", "👍🏿", "🏳️‍🌈", "1\u20e3", "\U000e0041"]
)
USER_SYMBOLS = ["<sep>", "[MASK]", "@@", "✨✨", "foo▁bar"]


def random_char():
    r = rng.random()
    if r < 0.05:
        return chr(rng.randint(0x20, 0x7e))
    if r < 0.10:
        return chr(rng.randint(0xa0, 0x24f))
    if r < 0.15:
        return chr(rng.randint(0x300, 0x36f))
    if r < 0.20:
        return chr(rng.randint(0xff00, 0xffef))
    if r < 0.25:
        return chr(rng.randint(0x2000, 0x2bff))
    if r < 0.30:
        return chr(rng.randint(0x3000, 0x33ff))
    if r < 0.35:
        return chr(rng.randint(0xfb00, 0xfdff))
    if r < 0.40:
        return chr(rng.randint(0x1f300, 0x1faff))
    if r < 0.45:
        return chr(rng.randint(0x0, 0x1f))
    if r < 0.50:
        c = rng.randint(0x80, 0x2ffff)
        return chr(c) if not 0xd800 <= c < 0xe000 else "?"
    if r < 0.60:
        return rng.choice(WEIRD)
    if r < 0.70:
        return " " * rng.randint(1, 5)
    return word(rng.choice(SCRIPTS))


def test_string(i):
    kind = i % 10
    if kind == 0:
        return rng.choice(["", " ", "  ", "\t", "\n", "\u3000", "▁", "x", " x ", "   x   y   "])
    if kind in (1, 2, 3):
        return sentence()
    if kind == 4:  # sentences with whitespace noise
        s = sentence()
        parts = s.split(" ")
        return "".join(p + rng.choice([" ", "  ", "   ", "\t", " \n ", "\u3000", "\xa0"]) for p in parts)
    if kind == 5:
        return "".join(random_char() for _ in range(rng.randint(1, 40)))
    if kind == 6:
        return rng.choice(WEIRD) + sentence() + rng.choice(WEIRD)
    if kind == 7:  # user-defined symbols and reserved pieces in context
        return " ".join(rng.choice([word("latin"), rng.choice(USER_SYMBOLS), rng.choice(WEIRD)]) for _ in range(rng.randint(1, 8)))
    if kind == 8:  # unnormalised forms
        return "".join(rng.choice(["ﬁ", "ﬂ", "ｆｕｌｌ", "Ａ", "１２", "e\u0301", "\u0301", "①", "™", "ｶ", "ﾞ", " ", "x", "Å", "ǅ", "㍿"]) for _ in range(rng.randint(1, 30)))
    if rng.random() < 0.02:  # very long
        return " ".join(sentence() for _ in range(200))
    return " ".join(sentence() for _ in range(rng.randint(2, 8)))


# ---------------------------------------------------------------- models
# name, vocab size, extra trainer args, write tokenizer.json
MODELS = [
    ("nmt_nfkc_200", 200, dict(normalization_rule_name="nmt_nfkc", character_coverage=0.98, small=True), False),
    ("nmt_nfkc_2000_bytes", 2000, dict(normalization_rule_name="nmt_nfkc", byte_fallback=True, character_coverage=0.98), True),
    ("nfkc_4000_t5ids", 4000, dict(normalization_rule_name="nfkc", pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=0.9995), False),
    ("identity_500_user", 500, dict(normalization_rule_name="identity", byte_fallback=True, user_defined_symbols=USER_SYMBOLS,
                                    control_symbols=["<ctl>"], character_coverage=0.98, small=True), True),
    ("nfkc_cf_300_raw_ws", 300, dict(normalization_rule_name="nmt_nfkc_cf", remove_extra_whitespaces=False, add_dummy_prefix=False,
                                     character_coverage=0.98, small=True, split_digits=True), True),
    ("nmt_nfkc_800_suffix", 800, dict(normalization_rule_name="nmt_nfkc", treat_whitespace_as_suffix=True, character_coverage=0.98, small=True), False),
    ("nmt_nfkc_8000", 8000, dict(normalization_rule_name="nmt_nfkc", character_coverage=0.9995, pad_id=3), False),
]


def varint(b, off):
    v, shift = 0, 0
    while True:
        c = b[off]
        off += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, off


def fields(b):
    off = 0
    while off < len(b):
        key, off = varint(b, off)
        num, typ = key >> 3, key & 7
        if typ == 0:
            v, off = varint(b, off)
        elif typ == 1:
            v, off = b[off:off + 8], off + 8
        elif typ == 5:
            v, off = b[off:off + 4], off + 4
        elif typ == 2:
            n, off = varint(b, off)
            v, off = b[off:off + n], off + n
        else:
            raise ValueError(typ)
        yield num, typ, v


def model_info(proto):
    """Pieces (text, score, type) and the normalizer spec of a ModelProto."""
    pieces, norm, trainer = [], {"add_dummy_prefix": True, "remove_extra_whitespaces": True, "charsmap": b""}, {}
    for num, _, v in fields(proto):
        if num == 1:
            p = {"type": 1, "score": 0.0}
            for n2, _, v2 in fields(v):
                if n2 == 1:
                    p["piece"] = v2.decode()
                elif n2 == 2:
                    p["score"] = struct.unpack("<f", v2)[0]
                elif n2 == 3:
                    p["type"] = v2
            pieces.append(p)
        elif num == 2:
            for n2, _, v2 in fields(v):
                if n2 == 35:
                    trainer["byte_fallback"] = bool(v2)
        elif num == 3:
            for n2, _, v2 in fields(v):
                if n2 == 2:
                    norm["charsmap"] = v2
                elif n2 == 3:
                    norm["add_dummy_prefix"] = bool(v2)
                elif n2 == 4:
                    norm["remove_extra_whitespaces"] = bool(v2)
    return pieces, norm, trainer


def to_tokenizer_json(proto):
    """A tokenizer.json as transformers' SpmConverter / T5Converter writes it."""
    pieces, norm, trainer = model_info(proto)
    added = []
    for i, p in enumerate(pieces):
        if p["type"] in (2, 3, 4):  # unknown, control, user-defined
            added.append({"id": i, "content": p["piece"], "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": p["type"] == 4, "special": p["type"] != 4})
    normalizers = []
    if norm["charsmap"]:
        normalizers.append({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(norm["charsmap"]).decode()})
    if norm["remove_extra_whitespaces"]:
        normalizers += [{"type": "Strip", "strip_left": False, "strip_right": True},
                        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "▁"}]
    scheme = "always" if norm["add_dummy_prefix"] else "never"
    eos = next((i for i, p in enumerate(pieces) if p["piece"] == "</s>"), None)
    unk = next(i for i, p in enumerate(pieces) if p["type"] == 2)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": True},
        "post_processor": None if eos is None else {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [eos], "tokens": ["</s>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": True},
        "model": {"type": "Unigram", "unk_id": unk, "vocab": [[p["piece"], p["score"]] for p in pieces],
                  "byte_fallback": trainer.get("byte_fallback", False)},
    }


BAD_BYTES = [b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc3", b"\xe2\x96", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\xaf",
             b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\x00"]


def invalid_utf8(i):
    """A byte string with malformed UTF-8 spliced into a test string."""
    b = bytearray(test_string(i + 1).encode())
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(b))
        b[at:at] = rng.choice(BAD_BYTES)
    return bytes(b)


def write_golden(path, header, id_lists):
    """A golden file: a JSON header line, then one line of space-separated ids
    per corpus string (the text strings, then the malformed UTF-8 ones)."""
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(header, ensure_ascii=False).encode() + b"\n")
        for ids in id_lists:
            f.write(" ".join(map(str, ids)).encode() + b"\n")


DECODED = 600  # strings whose decoded text the golden files keep


def main():
    os.makedirs(os.path.join(HERE, "models"), exist_ok=True)
    os.makedirs(os.path.join(HERE, "golden"), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as f:
            for _ in range(30000):
                f.write(sentence() + "\n")
        small_corpus = os.path.join(tmp, "small.txt")
        with open(small_corpus, "w") as f:
            for _ in range(10000):
                f.write(sentence(SMALL_SCRIPTS) + "\n")
        for name, vocab, extra, write_json in MODELS:
            extra = dict(extra)
            source = small_corpus if extra.pop("small", False) else corpus
            prefix = os.path.join(tmp, name)
            spm.SentencePieceTrainer.train(input=source, model_prefix=prefix, vocab_size=vocab, model_type="unigram",
                                           num_threads=2, seed_sentencepiece_size=200000, minloglevel=2, **extra)
            proto = open(prefix + ".model", "rb").read()
            open(os.path.join(HERE, "models", name + ".model"), "wb").write(proto)
            if write_json:
                with gzip.open(os.path.join(HERE, "models", name + ".tokenizer.json.gz"), "wt", compresslevel=9) as f:
                    json.dump(to_tokenizer_json(proto), f, ensure_ascii=False)
    strings = [test_string(i) for i in range(4000)]
    raw = [invalid_utf8(i) for i in range(300)]
    with gzip.GzipFile(os.path.join(HERE, "strings.json.gz"), "wb", mtime=0) as f:
        f.write(json.dumps({"strings": strings, "invalid_utf8_hex": [b.hex() for b in raw]}, ensure_ascii=False).encode())
    for name, *_ in MODELS:
        sp = spm.SentencePieceProcessor(model_file=os.path.join(HERE, "models", name + ".model"))
        ids = [sp.encode(s) for s in strings]
        decoded = [sp.decode(x) for x in ids[:DECODED]]
        header = {"vocab_size": sp.get_piece_size(), "eos_id": sp.eos_id(), "pad_id": sp.pad_id(), "unk_id": sp.unk_id(),
                  "decoded": decoded}
        write_golden(os.path.join(HERE, "golden", name + ".txt.gz"), header, ids + [sp.encode(b) for b in raw])
        print(name, sp.get_piece_size(), sum(map(len, ids)), "ids", file=sys.stderr)


if __name__ == "__main__":
    main()
