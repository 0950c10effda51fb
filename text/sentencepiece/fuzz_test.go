package sentencepiece

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"
	"unicode/utf8"
)

func readGzip(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var fuzzTexts = []string{"", " ", "Hello  wörld ﬁ ＡＢＣ", "日本語のテキスト", "<sep>foo▁bar✨✨", "\xff\xc3(", "e\u0301\u0301 😀\u200d😀"}

// exercise runs every entry point on a tokenizer and checks the invariants
// that hold for any model: ids in range, EOS last, masks that match.
func exercise(t *testing.T, tok *Tokenizer, texts ...string) {
	for _, s := range texts {
		ids, err := tok.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("Encode(%q) gave id %d outside [0, %d)", s, id, tok.VocabSize())
			}
		}
		_ = tok.Decode(ids)
	}
	if tok.EOSID() < 0 || tok.PadID() < 0 {
		return
	}
	const maxLen = 7
	rows, masks, err := tok.EncodeBatch(texts, maxLen, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if len(rows[i]) != maxLen || len(masks[i]) != maxLen {
			t.Fatalf("row %d: %d ids, %d mask, want %d", i, len(rows[i]), len(masks[i]), maxLen)
		}
		real := 0
		for _, m := range masks[i] {
			real += int(m)
		}
		if real == 0 || rows[i][real-1] != int32(tok.EOSID()) {
			t.Fatalf("row %d = %v (mask %v) does not end its real ids with EOS", i, rows[i], masks[i])
		}
	}
}

// FuzzParseModel feeds arbitrary bytes to the ModelProto parser; whatever
// loads must then encode without panicking.
func FuzzParseModel(f *testing.F) {
	for _, p := range []string{"testdata/models/identity_500_user.model", "testdata/models/nmt_nfkc_200.model"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02, 0x0a, 0x03, 0x0a, 0x01, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := ParseModel(data)
		if err != nil {
			return
		}
		exercise(t, tok, fuzzTexts...)
	})
}

// FuzzParseTokenizerJSON feeds arbitrary bytes to the tokenizer.json loader.
func FuzzParseTokenizerJSON(f *testing.F) {
	f.Add(readGzip(f, "testdata/models/identity_500_user.tokenizer.json.gz"))
	f.Add([]byte(`{"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["a",-1]]},"pre_tokenizer":{"type":"Metaspace","replacement":"▁"}}`))
	f.Add([]byte(`{"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0],["▁",-1]]},"normalizer":{"type":"Precompiled","precompiled_charsmap":"AAAA"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := ParseTokenizerJSON(data)
		if err != nil {
			return
		}
		exercise(t, tok, fuzzTexts...)
	})
}

// FuzzEncode feeds arbitrary text to tokenizers with a charsmap, byte
// fallback and user-defined symbols.
func FuzzEncode(f *testing.F) {
	var toks []*Tokenizer
	for _, p := range []string{"testdata/models/nmt_nfkc_2000_bytes.model", "testdata/models/identity_500_user.model",
		"testdata/models/nfkc_4000_t5ids.model", "testdata/models/nmt_nfkc_800_suffix.model"} {
		tok, err := Load(p)
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	for _, s := range fuzzTexts {
		f.Add(s)
	}
	f.Add(string(bytes.Repeat([]byte("ab "), 300)))
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range toks {
			exercise(t, tok, s, "")
			ids, _ := tok.Encode(s)
			if d := tok.Decode(ids); !utf8.ValidString(d) {
				t.Fatalf("Decode(Encode(%q)) = %q is not UTF-8", s, d)
			}
		}
	})
}
