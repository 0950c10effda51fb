package umt5

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/text/sentencepiece"
)

// parityTol is the relative L2 error every reference output must meet (fp32 reference).
const parityTol = 1e-4

// goldenCases are the folders testdata/reference.py writes (see testdata/README.md).
var goldenCases = []string{"small", "odd", "wide", "spm", "sharded"}

// spmModel is the SentencePiece model the "spm" case's prompts are tokenized with.
var spmModel = filepath.Join("..", "..", "text", "sentencepiece", "testdata", "models", "nfkc_4000_t5ids.model")

// caseTokenizer returns the tokenizer reference.py used for a case.
func caseTokenizer(t *testing.T, name string, vocab int) Tokenizer {
	if name != "spm" {
		return fakeTokenizer{vocab}
	}
	tok, err := sentencepiece.Load(spmModel)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// fakeTokenizer is testdata/reference.py's FakeTokenizer: one id per space-separated word
// (a rolling hash of its UTF-8 bytes, in [2, vocab)), </s> = 1 appended, pad id 0.
type fakeTokenizer struct{ vocab int }

func (f fakeTokenizer) EncodeBatch(texts []string, maxLen int, padding bool) (ids, mask [][]int32, err error) {
	for _, t := range texts {
		var row []int32
		for _, w := range strings.Split(t, " ") {
			if w == "" {
				continue
			}
			h := 0
			for _, b := range []byte(w) {
				h = (h*31 + int(b)) % 1000003
			}
			row = append(row, int32(2+h%(f.vocab-2)))
		}
		row = append(row[:min(len(row), maxLen-1)], 1)
		m := make([]int32, len(row), maxLen)
		for i := range m {
			m[i] = 1
		}
		for padding && len(row) < maxLen {
			row, m = append(row, 0), append(m, 0)
		}
		ids, mask = append(ids, row), append(mask, m)
	}
	return ids, mask, nil
}

// asRows turns a [B, L] float tensor of integers into rows.
func asRows(t *tensor.Dense) [][]int32 {
	b, l := t.Shape[0], t.Shape[1]
	out := make([][]int32, b)
	for i := range out {
		out[i] = make([]int32, l)
		for j := range out[i] {
			out[i][j] = int32(t.Data[i*l+j])
		}
	}
	return out
}

func TestGoldenHiddenStates(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			m, err := Load(dir, goldentest.Backend(t), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			in := goldentest.ReadTensors(t, filepath.Join(dir, "inputs.safetensors"))
			want := goldentest.ReadTensors(t, filepath.Join(dir, "outputs.safetensors"))
			got, err := m.Forward(asRows(in["input_ids"]), asRows(in["attention_mask"]))
			if err != nil {
				t.Fatal(err)
			}
			goldentest.CheckClose(t, "last_hidden_state", got, want["last_hidden_state"], parityTol)
		})
	}
}

func TestGoldenPromptEmbeds(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			m, err := Load(dir, goldentest.Backend(t), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var ref struct {
				Prompts   []string `json:"prompts"`
				Cleaned   []string `json:"cleaned"`
				MaxSeqLen int      `json:"max_sequence_length"`
			}
			readJSON(t, filepath.Join(dir, "prompts.json"), &ref)
			for i, p := range ref.Prompts {
				if got := PromptClean(p); got != ref.Cleaned[i] {
					t.Errorf("PromptClean(%q) = %q, want %q", p, got, ref.Cleaned[i])
				}
			}
			want := goldentest.ReadTensors(t, filepath.Join(dir, "outputs.safetensors"))["prompt_embeds"]
			got, err := m.PromptEmbeds(caseTokenizer(t, name, m.Config().VocabSize), ref.Prompts, ref.MaxSeqLen)
			if err != nil {
				t.Fatal(err)
			}
			goldentest.CheckClose(t, "prompt_embeds", got, want, parityTol)
			// The padding rows are exact zeros, as diffusers writes them.
			d := m.Config().DModel
			for i := range ref.Prompts {
				for j := 0; j < ref.MaxSeqLen; j++ {
					row := got.Data[(i*ref.MaxSeqLen+j)*d : (i*ref.MaxSeqLen+j+1)*d]
					wrow := want.Data[(i*ref.MaxSeqLen+j)*d : (i*ref.MaxSeqLen+j+1)*d]
					if (wrow[0] == 0 && wrow[d-1] == 0) != (row[0] == 0 && row[d-1] == 0) {
						t.Fatalf("prompt %d row %d: zero padding differs from the reference", i, j)
					}
				}
			}
		})
	}
}

func TestGoldenBuckets(t *testing.T) {
	var ref struct {
		MaxAbs int `json:"max_abs_position"`
		Cases  []struct {
			NumBuckets  int   `json:"num_buckets"`
			MaxDistance int   `json:"max_distance"`
			Buckets     []int `json:"buckets"`
		} `json:"cases"`
	}
	readJSON(t, filepath.Join("testdata", "buckets.json"), &ref)
	for _, c := range ref.Cases {
		bad := 0
		for i, want := range c.Buckets {
			rel := i - ref.MaxAbs
			if got := RelativePositionBucket(rel, c.NumBuckets, c.MaxDistance); got != want && bad < 5 {
				bad++
				t.Errorf("buckets %d, max distance %d: relative position %d: bucket %d, want %d", c.NumBuckets, c.MaxDistance, rel, got, want)
			}
		}
	}
}

func TestGoldenPromptClean(t *testing.T) {
	var ref []struct{ In, Out string }
	readJSON(t, filepath.Join("testdata", "clean.json"), &ref)
	for _, c := range ref {
		if got := PromptClean(c.In); got != c.Out {
			t.Errorf("PromptClean(%q) = %q, want %q", c.In, got, c.Out)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
