package plan

import (
	"context"
	"fmt"
	"image"
	"math/rand/v2"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/tensor"
)

// measurePrepare times the model's conditioning of one sample of the workload on stage 0
// (the family's Prepare with the Condition role: an image-to-video model's image encoder
// and VAE encode of the image, prompt embeddings for a text model): the mean of two timed
// samples after one untimed one that compiles, each with a new random image (a family may
// keep the last image's conditioning). Prompts are given as random embeddings, so a text
// encoder's cost is not in it.
func (c Command) measurePrepare(ctx context.Context) (float64, error) {
	m, err := c.resolveModel()
	if err != nil {
		return 0, fmt.Errorf("plan: %w", err)
	}
	desc, err := m.Describe()
	if err != nil {
		return 0, err
	}
	s, err := m.Open(family.Options{Backend: c.Backend, Roles: family.Roles{Condition: true}, Weights: c.Weights})
	if err != nil {
		return 0, fmt.Errorf("plan: --measure-prepare: %w", err)
	}
	defer s.Close()
	p := s.DefaultParams()
	p.Steps, p.NumFrames, p.Height, p.Width = 1, c.NumFrames, c.Height, c.Width
	p.GuidanceScale, p.MinGuidance, p.MaxGuidance = c.GuidanceScale, c.MinGuidance, c.MaxGuidance
	p.SchedulerChoice = c.Schedule
	sc, err := s.Scheduler(p)
	if err != nil {
		return 0, err
	}
	r := rand.New(rand.NewPCG(uint64(c.Seed), 2))
	var total time.Duration
	const timed = 2
	for pass := range 1 + timed {
		var in family.Input
		if desc.ImageNeed() != family.NeedNone {
			in.Image = noiseImage(r, p.Width, p.Height)
		}
		if desc.LastImage == family.NeedRequired {
			in.LastImage = noiseImage(r, p.Width, p.Height)
		}
		if desc.TextDim > 0 {
			in.PromptEmbeds, in.NegativePromptEmbeds = noiseEmbeds(r, desc.TextDim), noiseEmbeds(r, desc.TextDim)
		}
		t0 := time.Now()
		if _, err := s.Prepare(ctx, in, p, sc, []int64{int64(pass)}); err != nil {
			return 0, fmt.Errorf("plan: --measure-prepare: %w", err)
		}
		if pass > 0 {
			total += time.Since(t0)
		}
	}
	return float64(total.Microseconds()) / 1e3 / timed, nil
}

// noiseImage is a w × h image of uniform random pixels.
func noiseImage(r *rand.Rand, w, h int) image.Image {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = uint8(r.IntN(256))
	}
	for i := 3; i < len(m.Pix); i += 4 {
		m.Pix[i] = 255
	}
	return m
}

// noiseEmbeds are prompt embeddings of 512 N(0, 1) rows of width d (the length Wan's text
// encoder pads to).
func noiseEmbeds(r *rand.Rand, d int) *tensor.Dense {
	t := tensor.New(512, d)
	for i := range t.Data {
		t.Data[i] = float32(r.NormFloat64())
	}
	return t
}
