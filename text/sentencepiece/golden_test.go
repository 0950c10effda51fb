package sentencepiece

import (
	"bufio"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The golden files are written by testdata/gen.py, which trains the models
// with the reference (python3-sentencepiece) and records its ids.

type golden struct {
	VocabSize int      `json:"vocab_size"`
	EOSID     int      `json:"eos_id"`
	PadID     int      `json:"pad_id"`
	UnkID     int      `json:"unk_id"`
	Decoded   []string `json:"decoded"`
	// IDs are the reference's ids of each corpus string (goldenStrings order).
	IDs [][]int `json:"-"`
}

// readGolden reads testdata/golden/NAME.txt.gz: a JSON header line, then one
// line of space-separated ids per corpus string.
func readGolden(t testing.TB, name string) *golden {
	t.Helper()
	path := filepath.Join("testdata/golden", name+".txt.gz")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	var g golden
	if !sc.Scan() {
		t.Fatalf("%s: no header", path)
	}
	if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
		t.Fatalf("%s header: %v", path, err)
	}
	for sc.Scan() {
		line := sc.Bytes()
		ids := make([]int, 0, len(line)/4)
		for len(line) > 0 {
			n := 0
			i := 0
			for ; i < len(line) && line[i] != ' '; i++ {
				n = n*10 + int(line[i]-'0')
			}
			ids = append(ids, n)
			line = line[min(i+1, len(line)):]
		}
		g.IDs = append(g.IDs, ids)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &g
}

// corpus is testdata/strings.json.gz: text strings, and byte strings with
// malformed UTF-8 (hex), which the reference reads byte by byte.
type corpus struct {
	Strings    []string `json:"strings"`
	InvalidHex []string `json:"invalid_utf8_hex"`
}

func readGzipJSON(t testing.TB, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func goldenModels(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob("testdata/models/*.model")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no models in testdata/models (run testdata/gen.py): %v", err)
	}
	return paths
}

func goldenStrings(t testing.TB) []string {
	var c corpus
	readGzipJSON(t, "testdata/strings.json.gz", &c)
	for _, h := range c.InvalidHex {
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		c.Strings = append(c.Strings, string(b))
	}
	return c.Strings
}

func modelName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".model")
}

func loadJSONModel(t testing.TB, path string) *Tokenizer {
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
	var raw json.RawMessage
	if err := json.NewDecoder(zr).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	tok, err := ParseTokenizerJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tok
}

func checkGolden(t *testing.T, tok *Tokenizer, g *golden, strs []string, checkDecode bool) {
	t.Helper()
	if tok.VocabSize() != g.VocabSize || tok.EOSID() != g.EOSID || tok.PadID() != g.PadID || tok.UnknownID() != g.UnkID {
		t.Errorf("vocab/eos/pad/unk = %d/%d/%d/%d, reference %d/%d/%d/%d", tok.VocabSize(), tok.EOSID(), tok.PadID(),
			tok.UnknownID(), g.VocabSize, g.EOSID, g.PadID, g.UnkID)
	}
	want := g.IDs
	if len(want) != len(strs) {
		t.Fatalf("golden file has %d id lists for %d strings", len(want), len(strs))
	}
	bad := 0
	for i, s := range strs {
		got, err := tok.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[i]) {
			bad++
			if bad <= 5 {
				t.Errorf("string %d %q:\n got %v\nwant %v", i, s, got, want[i])
			}
			continue
		}
		if checkDecode && i < len(g.Decoded) {
			if d := tok.Decode(got); d != g.Decoded[i] {
				bad++
				if bad <= 5 {
					t.Errorf("string %d: Decode = %q, reference %q", i, d, g.Decoded[i])
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d strings differ from the reference", bad, len(strs))
	}
}

// TestGoldenModelFiles checks every model's ids (and decoded text) against
// the reference on the whole test corpus.
func TestGoldenModelFiles(t *testing.T) {
	strs := goldenStrings(t)
	for _, path := range goldenModels(t) {
		name := modelName(path)
		t.Run(name, func(t *testing.T) {
			tok, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Parallel()
			checkGolden(t, tok, readGolden(t, name), strs, true)
		})
	}
}

// TestGoldenTokenizerJSON checks that the tokenizer.json conversions encode
// exactly as the model files they came from.
func TestGoldenTokenizerJSON(t *testing.T) {
	strs := goldenStrings(t)
	paths, _ := filepath.Glob("testdata/models/*.tokenizer.json.gz")
	if len(paths) == 0 {
		t.Fatal("no tokenizer.json conversions in testdata/models")
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".tokenizer.json.gz")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tok := loadJSONModel(t, path)
			checkGolden(t, tok, readGolden(t, name), strs, false)
		})
	}
}
