package wan

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan/wantest"
)

// The text encoder is a first-stage component: loaded with the Condition role and
// Options.Prompts only, listed in WeightBytes; each sample's Prepare encodes the prompt and
// the negative prompt once (later samples hit the cache), and a prompt gives the same item
// as its embeddings given directly.
func TestSamplerPrompt(t *testing.T) {
	dir := wantest.PromptFolder(t)
	cond := family.Options{Roles: family.Roles{Condition: true}, Prompts: true}
	var loads int
	cond.Progress = func(c string, l, tot int64) {
		if c != TextEncoder || l > tot {
			t.Errorf("progress %s %d/%d", c, l, tot)
		}
		loads++
	}
	s, err := Load(dir, cond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if loads == 0 {
		t.Error("no load progress")
	}
	wb := s.WeightBytes()
	if len(wb) != 1 || wb[TextEncoder] <= 0 {
		t.Fatalf("weights %v, want the text encoder only", wb)
	}
	p := s.DefaultParams()
	p.NumFrames, p.Height, p.Width, p.Steps = 5, 32, 32, 2
	sc, err := s.Scheduler(p)
	if err != nil {
		t.Fatal(err)
	}
	in := family.Input{Prompt: &family.Prompt{Text: "A red fox runs through the snow", Negative: ""}}
	ctx := context.Background()
	for sample := int64(0); sample < 3; sample++ {
		it, err := s.Prepare(ctx, in, p, sc, []int64{sample})
		if err != nil {
			t.Fatal(err)
		}
		if len(it.Cond) != 1 || it.Cond[0][KeyPromptEmbeds] == nil || it.Cond[0][KeyNegativeEmbeds] == nil {
			t.Fatalf("conditioning %v", it.Cond)
		}
	}
	if h, m := s.Text.CacheStats(); h != 4 || m != 2 {
		t.Fatalf("3 samples: cache hits %d misses %d, want 4 and 2 (prompt and negative encoded once)", h, m)
	}

	pos, _ := s.Text.Embeds(in.Prompt.Text)
	neg, _ := s.Text.Embeds(in.Prompt.Negative)
	a, err := s.Prepare(ctx, in, p, sc, []int64{7})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Prepare(ctx, family.Input{PromptEmbeds: pos, NegativePromptEmbeds: neg}, p, sc, []int64{7})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Latent.Data, b.Latent.Data) || !slices.Equal(a.Guidance, b.Guidance) {
		t.Fatal("a prompt and its embeddings give different items")
	}
	for _, k := range []string{KeyPromptEmbeds, KeyNegativeEmbeds} {
		if !slices.Equal(a.Cond[0][k].Data, b.Cond[0][k].Data) || !slices.Equal(a.Cond[0][k].Shape, b.Cond[0][k].Shape) {
			t.Fatalf("%s differs", k)
		}
	}
	if _, err := s.Prepare(ctx, family.Input{Prompt: in.Prompt, PromptEmbeds: pos}, p, sc, []int64{0}); !errors.Is(err, ErrInput) {
		t.Fatalf("prompt and embeddings: %v", err)
	}

	// Other stages load no text encoder, and a prompt there is an error.
	d, err := Load(dir, family.Options{Roles: family.Roles{Decode: true}, Prompts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Text != nil || d.WeightBytes()[TextEncoder] != 0 {
		t.Fatal("a decode-only process loaded the text encoder")
	}
	if _, err := d.Prepare(ctx, in, p, sc, []int64{0}); !errors.Is(err, ErrInput) {
		t.Fatalf("prompt without a text encoder: %v", err)
	}
}

// wan-dev has no text_encoder/: preflight for prompts names it.
func TestPreflightPromptsNoEncoder(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	err := wanFamily{}.Preflight(dev, family.Options{Roles: family.AllRoles, Prompts: true})
	if !errors.Is(err, ErrNoTextEncoder) {
		t.Fatalf("%v", err)
	}
	if err := (wanFamily{}).Preflight(dev, family.Options{Roles: family.AllRoles}); err != nil {
		t.Fatalf("without prompts: %v", err)
	}
}
