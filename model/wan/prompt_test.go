package wan

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/safetensors"
)

// promptData is testdata/prompts: a tiny text_encoder/ and tokenizer/ in the diffusers
// layout and WanPipeline's embeddings of prompts.json (see reference.py there).
const promptData = "testdata/prompts"

func loadPromptEncoder(t *testing.T) *PromptEncoder {
	t.Helper()
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	var last, total int64
	e, err := (&Folder{Dir: promptData}).LoadPromptEncoder(b, func(l, tot int64) { calls, last, total = calls+1, l, tot })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if calls == 0 || last != total || total <= 0 {
		t.Errorf("progress: %d calls, last %d of %d", calls, last, total)
	}
	return e
}

func relL2(got, want []float32) float64 {
	var d, n float64
	for i := range want {
		x := float64(got[i]) - float64(want[i])
		d += x * x
		n += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(d / n)
}

// Prompt text to embeddings end to end (tokenizer/spiece.model through text/sentencepiece,
// text_encoder/ through model/umt5) against diffusers' _get_t5_prompt_embeds executed with
// transformers' UMT5EncoderModel and python3-sentencepiece: a plain prompt, HTML
// references and extra whitespace, unknown characters, truncation past 512 tokens, and the
// empty negative prompt.
func TestPromptEmbedsReference(t *testing.T) {
	e := loadPromptEncoder(t)
	var meta struct {
		Prompts []string `json:"prompts"`
		Tokens  []int    `json:"tokens"`
		MaxLen  int      `json:"max_sequence_length"`
	}
	data, err := os.ReadFile(filepath.Join(promptData, "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(promptData, "embeds.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, err := f.Tensor("prompt_embeds")
	if err != nil {
		t.Fatal(err)
	}
	if e.MaxLen != meta.MaxLen || !slices.Equal(want.Shape, []int{len(meta.Prompts), meta.MaxLen, e.Width()}) {
		t.Fatalf("reference %v for %d prompts, encoder %d x %d", want.Shape, len(meta.Prompts), e.MaxLen, e.Width())
	}
	per := meta.MaxLen * e.Width()
	for i, p := range meta.Prompts {
		got, err := e.Embeds(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Shape, []int{meta.MaxLen, e.Width()}) {
			t.Fatalf("prompt %d: shape %v", i, got.Shape)
		}
		ref := want.Data[i*per : (i+1)*per]
		r := relL2(got.Data, ref)
		t.Logf("prompt %d (%d tokens): rel L2 %.2g", i, meta.Tokens[i], r)
		if r > 1e-4 {
			t.Errorf("prompt %d %q: rel L2 %.3g > 1e-4", i, p, r)
		}
		// The rows past the real tokens are exactly zero, as WanPipeline pads them.
		for j := meta.Tokens[i] * e.Width(); j < per; j++ {
			if got.Data[j] != 0 {
				t.Fatalf("prompt %d: element %d past %d tokens is %g", i, j, meta.Tokens[i], got.Data[j])
			}
		}
	}
}

// A prompt is encoded once: later calls with the same text (the negative prompt of every
// sample) are cache hits returning the same embeddings; the cache keeps PromptCacheSize
// prompts.
func TestPromptEncoderCache(t *testing.T) {
	e := loadPromptEncoder(t)
	neg1, err := e.Embeds("")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		neg, err := e.Embeds("")
		if err != nil {
			t.Fatal(err)
		}
		if neg != neg1 {
			t.Fatal("the cached negative prompt is a different tensor")
		}
	}
	if h, m := e.CacheStats(); h != 3 || m != 1 {
		t.Fatalf("hits %d misses %d, want 3 and 1", h, m)
	}
	for i := 0; i < PromptCacheSize; i++ {
		if _, err := e.Embeds(strings.Repeat("a ", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Embeds(""); err != nil { // evicted by PromptCacheSize newer prompts
		t.Fatal(err)
	}
	if h, m := e.CacheStats(); h != 3 || m != 2+PromptCacheSize {
		t.Fatalf("after eviction: hits %d misses %d", h, m)
	}
}

// A folder without text_encoder/ or tokenizer/ cannot take a prompt: one error naming
// the missing file.
func TestCheckTextMissing(t *testing.T) {
	dir := t.TempDir()
	err := (&Folder{Dir: dir}).CheckText()
	if !errors.Is(err, ErrNoTextEncoder) || !strings.Contains(err.Error(), filepath.Join(dir, TextEncoder, "config.json")) {
		t.Fatalf("no text_encoder: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, TextEncoder), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TextEncoder, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = (&Folder{Dir: dir}).CheckText()
	if !errors.Is(err, ErrNoTextEncoder) || !strings.Contains(err.Error(), filepath.Join(dir, Tokenizer)) {
		t.Fatalf("no tokenizer: %v", err)
	}
}
