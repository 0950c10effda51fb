package svdtest_test

import (
	"testing"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/serve"
)

// TestDefaultDecodeChunk: a job that leaves decode_chunk_size out gets the model spec's.
func TestDefaultDecodeChunk(t *testing.T) {
	for _, chunk := range []int{0, 7} {
		p := &svd.Pipeline{}
		p.UNetConfig.NumFrames = 14
		g := serve.NewModel(svd.NewSampler(p, checkpoint.DefaultSampling), family.Description{}, serve.ModelSpec{DecodeChunkSize: chunk})
		if got := g.DefaultParams().DecodeChunkSize; got != chunk {
			t.Errorf("spec chunk %d: default decode_chunk_size %d", chunk, got)
		}
	}
}

// TestDefaultGuidance: a job that leaves the guidance out gets the model spec's, or SVD's
// 1 and 3 when the spec sets none.
func TestDefaultGuidance(t *testing.T) {
	for _, tc := range []struct {
		spec             *[2]float64
		wantMin, wantMax float64
	}{
		{nil, 1, 3},
		{&[2]float64{2, 4}, 2, 4},
	} {
		p := &svd.Pipeline{}
		p.UNetConfig.NumFrames = 14
		spec := serve.ModelSpec{}
		if tc.spec != nil {
			spec.MinGuidance, spec.MaxGuidance = tc.spec[0], tc.spec[1]
		}
		g := serve.NewModel(svd.NewSampler(p, checkpoint.DefaultSampling), family.Description{}, spec)
		if got := g.DefaultParams(); got.MinGuidance != tc.wantMin || got.MaxGuidance != tc.wantMax {
			t.Errorf("spec %v: default guidance %v -> %v, want %v -> %v", tc.spec, got.MinGuidance, got.MaxGuidance, tc.wantMin, tc.wantMax)
		}
	}
}
