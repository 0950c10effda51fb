// hfcheck.js: encodes the parity corpus with Hugging Face's tokenizers (the
// npm package `tokenizers`, Rust underneath) from the tokenizer.json
// conversions and counts the strings whose ids differ from sentencepiece's
// golden ids. It shows what T5TokenizerFast would do with the same files; it
// is not run by the Go tests.
//
//   npm install --prefix /tmp/hftok tokenizers
//   NODE_PATH=/tmp/hftok/node_modules node hfcheck.js
const fs = require("fs");
const zlib = require("zlib");
const path = require("path");
const { Tokenizer } = require("tokenizers");

const corpus = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(__dirname, "strings.json.gz"))));
(async () => {
  for (const f of fs.readdirSync(path.join(__dirname, "models")).filter((f) => f.endsWith(".tokenizer.json.gz"))) {
    const name = f.replace(".tokenizer.json.gz", "");
    const tok = Tokenizer.fromString(zlib.gunzipSync(fs.readFileSync(path.join(__dirname, "models", f))).toString());
    const lines = zlib.gunzipSync(fs.readFileSync(path.join(__dirname, "golden", name + ".txt.gz"))).toString().split("\n");
    let diff = 0, special = 0;
    const byKind = new Array(10).fill(0);
    const examples = [];
    for (let i = 0; i < corpus.strings.length; i++) {
      const s = corpus.strings[i];
      const want = lines[i + 1] === "" ? [] : lines[i + 1].split(" ").map(Number);
      const got = (await tok.encode(s, null, { addSpecialTokens: false })).getIds();
      if (got.join(" ") !== want.join(" ")) {
        if (/<\/?s>|<unk>|<pad>|<ctl>|<sep>|\[MASK\]/.test(s)) { special++; continue; }
        diff++;
        byKind[i % 10]++;
        if (examples.length < 3) examples.push(JSON.stringify(s).slice(0, 80) + " got " + got.slice(0, 12) + " want " + want.slice(0, 12));
      }
    }
    console.log(`${name}: ${diff} of ${corpus.strings.length} strings differ (${special} more hold special-token text); ` +
      `plain sentences (kinds 1-3, 9): ${byKind[1] + byKind[2] + byKind[3] + byKind[9]} of 1600; by kind ${byKind}`);
    for (const e of examples) console.log("   ", e);
  }
})();
