package umt5

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// copyCase copies a golden case folder into a temporary one the test may break.
func copyCase(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("testdata", name)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestLoadErrors(t *testing.T) {
	b := goldentest.Backend(t)

	dir := copyCase(t, "small")
	os.Remove(filepath.Join(dir, ConfigFile))
	_, err := Load(dir, b, LoadOptions{})
	if !errors.Is(err, ErrConfig) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("missing config.json: %v", err)
	}

	dir = copyCase(t, "sharded")
	os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
	_, err = Load(dir, b, LoadOptions{})
	if !errors.Is(err, checkpoint.ErrShardIndex) || !strings.Contains(err.Error(), "shard model-00002-of-00002.safetensors is missing") {
		t.Errorf("missing shard: %v", err)
	}

	dir = copyCase(t, "small")
	os.Remove(filepath.Join(dir, "model.safetensors"))
	_, err = Load(dir, b, LoadOptions{})
	if !errors.Is(err, checkpoint.ErrWeights) || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("missing weights: %v", err)
	}

	// A config whose sizes disagree with the weights: every mis-shaped tensor is named.
	dir = copyCase(t, "small")
	cfg, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
	os.WriteFile(filepath.Join(dir, ConfigFile), []byte(strings.Replace(string(cfg), `"d_ff": 48`, `"d_ff": 50`, 1)), 0o644)
	_, err = Load(dir, b, LoadOptions{})
	if !errors.Is(err, checkpoint.ErrShapeMismatch) || !strings.Contains(err.Error(), `"encoder.block.0.layer.1.DenseReluDense.wi_0.weight": shape [48 32] in file, expected [50 32]`) {
		t.Errorf("wrong shapes: %v", err)
	}
	// One layer too many: the missing tensors are named.
	os.WriteFile(filepath.Join(dir, ConfigFile), []byte(strings.Replace(string(cfg), `"num_layers": 2`, `"num_layers": 3`, 1)), 0o644)
	_, err = Load(dir, b, LoadOptions{})
	if !errors.Is(err, checkpoint.ErrMissingTensor) || !strings.Contains(err.Error(), "encoder.block.2.") {
		t.Errorf("missing layer: %v", err)
	}
}

func TestLoadProgress(t *testing.T) {
	var last, total int64
	calls := 0
	m, err := Load(filepath.Join("testdata", "wide"), goldentest.Backend(t), LoadOptions{Progress: func(l, tot int64) {
		if l < last || l > tot {
			t.Errorf("progress %d of %d after %d", l, tot, last)
		}
		last, total = l, tot
		calls++
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, _ := ExpectedTensors(m.Config())
	if calls != len(want) || last != total || total != m.WeightBytes()/2 { // bf16 on disk
		t.Errorf("%d progress calls ending at %d of %d; want %d ending at %d", calls, last, total, len(want), m.WeightBytes()/2)
	}
}

func TestForwardInputErrors(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "small"), goldentest.Backend(t), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, c := range []struct {
		name      string
		ids, mask [][]int32
	}{
		{"empty", nil, nil},
		{"ragged", [][]int32{{1, 2}, {1}}, nil},
		{"id past vocab", [][]int32{{1, 97}}, nil},
		{"negative id", [][]int32{{-1}}, nil},
		{"mask rows", [][]int32{{1}}, [][]int32{{1}, {1}}},
		{"mask length", [][]int32{{1, 2}}, [][]int32{{1}}},
		{"mask value", [][]int32{{1, 2}}, [][]int32{{1, 2}}},
	} {
		if _, err := m.Forward(c.ids, c.mask); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", c.name, err)
		}
	}
	// A nil mask is all ones.
	a, err := m.Forward([][]int32{{5, 6, 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Forward([][]int32{{5, 6, 1}}, [][]int32{{1, 1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.BitEqual(a, b) {
		t.Error("nil mask differs from an all-ones mask")
	}
}

// badTokenizer returns rows of the wrong length.
type badTokenizer struct{ err error }

func (b badTokenizer) EncodeBatch(texts []string, maxLen int, _ bool) ([][]int32, [][]int32, error) {
	if b.err != nil {
		return nil, nil, b.err
	}
	row := make([]int32, maxLen-1)
	return [][]int32{row}, [][]int32{row}, nil
}

func TestPromptEmbedsErrors(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "small"), goldentest.Backend(t), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.PromptEmbeds(fakeTokenizer{97}, nil, 8); !errors.Is(err, ErrInput) {
		t.Errorf("no prompts: %v", err)
	}
	boom := errors.New("boom")
	if _, err := m.PromptEmbeds(badTokenizer{boom}, []string{"x"}, 8); !errors.Is(err, ErrTokenizer) || !errors.Is(err, boom) {
		t.Errorf("tokenizer error: %v", err)
	}
	if _, err := m.PromptEmbeds(badTokenizer{}, []string{"x"}, 8); !errors.Is(err, ErrTokenizer) || !strings.Contains(err.Error(), "want 8") {
		t.Errorf("short rows: %v", err)
	}
}

// TestPromptEmbedsRunLength checks that running the encoder on a shortened sequence (the
// padding cut off) gives the real tokens' embeddings of a full-length run, and that the
// default length is 512.
func TestPromptEmbedsRunLength(t *testing.T) {
	m, err := Load(filepath.Join("testdata", "odd"), goldentest.Backend(t), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompts := []string{"a b c d e", "one"}
	tok := fakeTokenizer{m.Config().VocabSize}
	got, err := m.PromptEmbeds(tok, prompts, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := m.Config().DModel
	if want := []int{2, DefaultMaxSequenceLength, d}; !equalShape(got.Shape, want) {
		t.Fatalf("shape %v, want %v", got.Shape, want)
	}
	ids, mask, _ := tok.EncodeBatch(prompts, 40, true)
	full, err := m.Forward(ids, mask) // 40 positions; PromptEmbeds ran 16
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{6, 2} {
		g := &tensor.Dense{Shape: []int{n, d}, Data: got.Data[i*512*d : (i*512+n)*d]}
		f := &tensor.Dense{Shape: []int{n, d}, Data: full.Data[i*40*d : (i*40+n)*d]}
		if rel := tensor.RelL2(g, f); rel > 1e-6 {
			t.Errorf("prompt %d: rel L2 %.3g between the short and the full run", i, rel)
		}
		for _, v := range got.Data[(i*512+n)*d : (i+1)*512*d] {
			if v != 0 {
				t.Fatalf("prompt %d: padding rows are not zero", i)
			}
		}
	}
}

func equalShape(a, b []int) bool {
	return len(a) == len(b) && (len(a) == 0 || a[0] == b[0] && equalShape(a[1:], b[1:]))
}

func TestRunLength(t *testing.T) {
	for n, want := range map[int]int{0: 16, 1: 16, 16: 16, 17: 32, 100: 128, 512: 512} {
		if got := runLength(n); got != want {
			t.Errorf("runLength(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestNewRejectsWrongWeights(t *testing.T) {
	cfg, err := ReadConfig(filepath.Join("testdata", "small"))
	if err != nil {
		t.Fatal(err)
	}
	b := goldentest.Backend(t)
	if _, err := New(cfg, map[string]*tensor.Dense{"shared.weight": tensor.New(97, 32)}, b); !errors.Is(err, nn.ErrMissingTensor) {
		t.Errorf("missing tensors: %v", err)
	}
}

func FuzzPromptClean(f *testing.F) {
	for _, s := range []string{"", " a  b ", "&amp;amp;", "&#x110000;", "&#99999999999999999999999", "&notit;", "\u3000x\x1c", "&", "&#", "&#x", "\xff&lt"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := PromptClean(s)
		if strings.Contains(out, "  ") {
			t.Fatalf("PromptClean(%q) = %q keeps a double space", s, out)
		}
		if out != "" {
			r, _ := utf8.DecodeRuneInString(out)
			l, _ := utf8.DecodeLastRuneInString(out)
			if pyIsSpace(r) || pyIsSpace(l) {
				t.Fatalf("PromptClean(%q) = %q is not stripped", s, out)
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		for _, r := range out {
			if pyIsSpace(r) && r != ' ' {
				t.Fatalf("PromptClean(%q) = %q keeps whitespace %U", s, out, r)
			}
		}
	})
}

// TestLoadEmbeddingAlias loads a folder whose embedding is stored only as
// encoder.embed_tokens.weight, and one that stores both names.
func TestLoadEmbeddingAlias(t *testing.T) {
	b := goldentest.Backend(t)
	ref, err := Load(filepath.Join("testdata", "small"), b, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	ids := [][]int32{{5, 9, 1}}
	want, _ := ref.Forward(ids, nil)
	for _, names := range [][]string{{TiedEmbedding}, {SharedEmbedding, TiedEmbedding}} {
		dir := copyCase(t, "small")
		ts := goldentest.ReadTensors(t, filepath.Join(dir, "model.safetensors"))
		emb := ts[SharedEmbedding]
		delete(ts, SharedEmbedding)
		var out []safetensors.NamedTensor
		for n, d := range ts {
			out = append(out, safetensors.NamedTensor{Name: n, Tensor: d})
		}
		for _, n := range names {
			out = append(out, safetensors.NamedTensor{Name: n, Tensor: emb})
		}
		if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), out, nil); err != nil {
			t.Fatal(err)
		}
		m, err := Load(dir, b, LoadOptions{})
		if err != nil {
			t.Fatalf("%v: %v", names, err)
		}
		got, _ := m.Forward(ids, nil)
		m.Close()
		if !tensor.BitEqual(got, want) {
			t.Errorf("%v: output differs from the reference folder's", names)
		}
	}
}
