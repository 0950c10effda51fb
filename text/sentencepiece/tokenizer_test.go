package sentencepiece

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func loadT5(t *testing.T) *Tokenizer {
	t.Helper()
	tok, err := Load("testdata/models/nfkc_4000_t5ids.model")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestEncodeBatchT5(t *testing.T) {
	tok := loadT5(t)
	if tok.PadID() != 0 || tok.EOSID() != 1 || tok.UnknownID() != 2 {
		t.Fatalf("pad/eos/unk = %d/%d/%d, want 0/1/2 (T5 layout)", tok.PadID(), tok.EOSID(), tok.UnknownID())
	}
	long := "the quick brown fox jumps over the lazy dog again and again"
	full, _ := tok.Encode(long)
	short, _ := tok.Encode("ab")
	if len(full) < 6 {
		t.Fatalf("long text has only %d ids", len(full))
	}
	ids, mask, err := tok.EncodeBatch([]string{long, "ab", ""}, 6, true)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int32{
		append(toInt32(full[:5]), 1),
		append(append(toInt32(short), 1), make([]int32, 6-len(short)-1)...),
		{1, 0, 0, 0, 0, 0},
	}
	wantMask := [][]int32{{1, 1, 1, 1, 1, 1}, maskOf(len(short)+1, 6), {1, 0, 0, 0, 0, 0}}
	if !reflect.DeepEqual(ids, want) || !reflect.DeepEqual(mask, wantMask) {
		t.Fatalf("EncodeBatch = %v %v\nwant %v %v", ids, mask, want, wantMask)
	}
	// Without padding the rows keep their own length; maxLen <= 0 keeps all ids.
	ids, mask, err = tok.EncodeBatch([]string{long, "ab"}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids[0]) != len(full)+1 || len(ids[1]) != len(short)+1 || len(mask[1]) != len(short)+1 {
		t.Fatalf("unpadded rows have lengths %d, %d", len(ids[0]), len(ids[1]))
	}
	// Padding without maxLen pads to the longest row.
	ids, mask, _ = tok.EncodeBatch([]string{long, "ab"}, 0, true)
	if len(ids[1]) != len(full)+1 || mask[1][len(short)+1] != 0 {
		t.Fatalf("padded to longest: row lengths %d, %d", len(ids[0]), len(ids[1]))
	}
	// maxLen 1 keeps only EOS.
	ids, _, _ = tok.EncodeBatch([]string{long}, 1, true)
	if !reflect.DeepEqual(ids, [][]int32{{1}}) {
		t.Fatalf("maxLen 1: %v", ids)
	}
}

func toInt32(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func maskOf(real, n int) []int32 {
	m := make([]int32, n)
	for i := 0; i < real; i++ {
		m[i] = 1
	}
	return m
}

func TestEncodeBatchNeedsSpecialPieces(t *testing.T) {
	// nmt_nfkc_200 has the default layout: unk 0, bos 1, eos 2 and no <pad>.
	tok, err := Load("testdata/models/nmt_nfkc_200.model")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tok.EncodeBatch([]string{"x"}, 4, true); !errors.Is(err, ErrNoSpecialPiece) {
		t.Fatalf("padding without <pad>: err = %v, want ErrNoSpecialPiece", err)
	}
	if _, _, err := tok.EncodeBatch([]string{"x"}, 4, false); err != nil {
		t.Fatalf("no padding: %v", err)
	}
}

func TestLoadFolder(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); !errors.Is(err, ErrNoModel) {
		t.Fatalf("empty folder: err = %v, want ErrNoModel", err)
	}
	jsonTok := loadJSONModel(t, "testdata/models/identity_500_user.tokenizer.json.gz")
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), readGzip(t, "testdata/models/identity_500_user.tokenizer.json.gz"), 0o644); err != nil {
		t.Fatal(err)
	}
	fromJSON, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fromJSON.VocabSize() != jsonTok.VocabSize() {
		t.Fatalf("folder with tokenizer.json: vocab %d, want %d", fromJSON.VocabSize(), jsonTok.VocabSize())
	}
	// spiece.model wins over tokenizer.json.
	model, _ := os.ReadFile("testdata/models/nfkc_4000_t5ids.model")
	if err := os.WriteFile(filepath.Join(dir, "spiece.model"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	fromModel, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fromModel.VocabSize() != 4000 {
		t.Fatalf("folder with spiece.model: vocab %d, want 4000", fromModel.VocabSize())
	}
	if _, err := Load(filepath.Join(dir, "missing.model")); err == nil {
		t.Fatal("missing file loaded")
	}
}

func TestCorruptModels(t *testing.T) {
	for name, data := range map[string][]byte{
		"truncated varint": {0x0a, 0x80},
		"length past end":  {0x0a, 0x10, 0x0a},
		"no pieces":        {},
		"no unk":           {0x0a, 0x03, 0x0a, 0x01, 'a'},
		"bad type":         {0x0a, 0x05, 0x0a, 0x01, 'a', 0x18, 0x09},
		"empty piece":      {0x0a, 0x02, 0x18, 0x02},
		"bpe":              {0x12, 0x02, 0x18, 0x02},
		"duplicate piece": {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
			0x0a, 0x03, 0x0a, 0x01, 'a', 0x0a, 0x03, 0x0a, 0x01, 'a'},
		"byte piece without byte_fallback": {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
			0x0a, 0x03, 0x0a, 0x01, 'a', 0x0a, 0x0a, 0x0a, 0x06, '<', '0', 'x', '4', '1', '>', 0x18, 0x06},
	} {
		if _, err := ParseModel(data); err == nil {
			t.Errorf("%s: loaded", name)
		} else if !errors.Is(err, ErrCorruptModel) && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: err = %v is neither ErrCorruptModel nor ErrUnsupported", name, err)
		}
	}
	for name, data := range map[string]string{
		"not json": "{",
		"bpe":      `{"model":{"type":"BPE"}}`,
		"bad unk":  `{"model":{"type":"Unigram","unk_id":5,"vocab":[["a",0]]}}`,
		"bad pair": `{"model":{"type":"Unigram","unk_id":0,"vocab":[["a"]]}}`,
	} {
		if _, err := ParseTokenizerJSON([]byte(data)); err == nil {
			t.Errorf("json %s: loaded", name)
		}
	}
}

func TestPieces(t *testing.T) {
	tok := loadT5(t)
	for _, p := range []string{"<pad>", "</s>", "<unk>", "▁"} {
		id, ok := tok.PieceToID(p)
		if !ok || tok.IDToPiece(id) != p {
			t.Errorf("PieceToID(%q) = %d, %v; IDToPiece gives %q", p, id, ok, tok.IDToPiece(id))
		}
	}
	if id, ok := tok.PieceToID("no such piece"); ok || id != tok.UnknownID() {
		t.Errorf("PieceToID(missing) = %d, %v", id, ok)
	}
	if tok.IDToPiece(-1) != "" || tok.IDToPiece(tok.VocabSize()) != "" {
		t.Error("IDToPiece out of range is not empty")
	}
}

func TestTokenizerJSONAddedTokensPastVocab(t *testing.T) {
	data := `{
	  "added_tokens": [
	    {"id": 0, "content": "<unk>", "special": true},
	    {"id": 5, "content": "<pad>", "special": true},
	    {"id": 4, "content": "</s>", "special": true}
	  ],
	  "normalizer": {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "▁"}]},
	  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
	    {"type": "Metaspace", "replacement": "▁", "add_prefix_space": true}]},
	  "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0], ["▁a", -1], ["a", -2], ["▁", -3]]}
	}`
	tok, err := ParseTokenizerJSON([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 6 || tok.EOSID() != 4 || tok.PadID() != 5 || tok.UnknownID() != 0 {
		t.Fatalf("vocab/eos/pad/unk = %d/%d/%d/%d, want 6/4/5/0", tok.VocabSize(), tok.EOSID(), tok.PadID(), tok.UnknownID())
	}
	ids, _ := tok.Encode("  a   ab ")
	if want := []int{1, 1, 0}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("Encode = %v, want %v", ids, want)
	}
	rows, mask, err := tok.EncodeBatch([]string{"a"}, 4, true)
	if err != nil || !reflect.DeepEqual(rows, [][]int32{{1, 4, 5, 5}}) || !reflect.DeepEqual(mask, [][]int32{{1, 1, 0, 0}}) {
		t.Fatalf("EncodeBatch = %v %v %v", rows, mask, err)
	}
}

// TestEncodeBatchMatchesFastTokenizer pins rows that Hugging Face's tokenizer
// (npm tokenizers 0.23.2, a T5-converter tokenizer.json of this model with
// setTruncation(8) and fixed padding to 8) produced.
func TestEncodeBatchMatchesFastTokenizer(t *testing.T) {
	tok := loadT5(t)
	ids, mask, err := tok.EncodeBatch([]string{"the quick brown fox jumps over the lazy dog", "ab", ""}, 8, true)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := [][]int32{{3, 3998, 3999, 1993, 3, 3949, 3997, 1}, {3, 1904, 3978, 1, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0, 0}}
	wantMask := [][]int32{{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0, 0}}
	if !reflect.DeepEqual(ids, wantIDs) || !reflect.DeepEqual(mask, wantMask) {
		t.Fatalf("EncodeBatch = %v %v\nfast tokenizer %v %v", ids, mask, wantIDs, wantMask)
	}
}
