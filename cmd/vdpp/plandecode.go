package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/tensor"
)

// measureDecode times the model's VAE decode of one random latent of the workload's shape,
// part by part (family.DecodePart): it returns the parts per sample and the mean part time
// in ms, after one untimed decode that compiles every part's shape.
func measureDecode(ctx context.Context, f *planFlags) (int, float64, error) {
	m, err := resolveModel(f.modelName, f.modelDir)
	if err != nil {
		return 0, 0, fmt.Errorf("plan: %w", err)
	}
	s, err := m.Open(family.Options{Backend: f.backend, Roles: family.Roles{Decode: true}})
	if err != nil {
		return 0, 0, fmt.Errorf("plan: --measure-decode: %w", err)
	}
	defer s.Close()
	p := s.DefaultParams()
	def := s.LatentShape(p)
	if len(def) != 4 || def[2] < 1 || def[3] < 1 {
		return 0, 0, fmt.Errorf("plan: --measure-decode: %s has no decoder", s.Family())
	}
	desc, err := m.Describe()
	if err != nil {
		return 0, 0, err
	}
	p.NumFrames = f.frames
	if fm := desc.FrameMultiple; fm > 0 {
		p.NumFrames = (f.frames-1)*fm + 1
	}
	p.Height, p.Width = f.height*(p.Height/def[2]), f.width*(p.Width/def[3])
	if f.chunk >= 0 {
		p.DecodeChunkSize = f.chunk
	}
	shape := []int{f.frames, f.channels, f.height, f.width}
	if got := s.LatentShape(p); !slices.Equal(got, shape) {
		return 0, 0, fmt.Errorf("plan: --measure-decode: the latent %v is not the model's %v for %d frames of %dx%d", shape, got, p.NumFrames, p.Width, p.Height)
	}
	lat := tensor.New(shape...)
	r := rand.New(rand.NewPCG(uint64(f.seed), 1))
	for i := range lat.Data {
		lat.Data[i] = float32(r.NormFloat64())
	}
	parts := family.DecodeParts(s, p)
	var total time.Duration
	for pass := range 2 { // the first pass compiles
		for part := range parts {
			t0 := time.Now()
			if _, err := family.DecodePart(ctx, s, lat, p, part); err != nil {
				return 0, 0, fmt.Errorf("plan: --measure-decode: %w", err)
			}
			if pass == 1 {
				total += time.Since(t0)
			}
		}
	}
	return parts, float64(total.Microseconds()) / 1e3 / float64(parts), nil
}
