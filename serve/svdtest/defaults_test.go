package svdtest_test

import (
	"testing"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/serve"
)

// TestDefaultDecodeChunk: a job that leaves decode_chunk_size out gets the folder's
// (vdpp_sampling.json).
func TestDefaultDecodeChunk(t *testing.T) {
	for _, chunk := range []int{0, 7} {
		p := &svd.Pipeline{}
		p.UNetConfig.NumFrames = 14
		smp := checkpoint.DefaultSampling
		smp.DecodeChunkSize = chunk
		g := serve.NewModel(svd.NewSampler(p, smp), family.Description{}, serve.ModelSpec{})
		if got := g.DefaultParams().DecodeChunkSize; got != chunk {
			t.Errorf("folder chunk %d: default decode_chunk_size %d", chunk, got)
		}
	}
}

// TestDefaultGuidance: a job that leaves the guidance out gets the folder's, or SVD's 1
// and 3 when the folder sets none.
func TestDefaultGuidance(t *testing.T) {
	for _, tc := range []struct {
		folder           *[2]float64
		wantMin, wantMax float64
	}{
		{nil, 1, 3},
		{&[2]float64{2, 4}, 2, 4},
	} {
		p := &svd.Pipeline{}
		p.UNetConfig.NumFrames = 14
		smp := checkpoint.DefaultSampling
		if tc.folder != nil {
			smp.MinGuidance, smp.MaxGuidance = tc.folder[0], tc.folder[1]
		}
		g := serve.NewModel(svd.NewSampler(p, smp), family.Description{}, serve.ModelSpec{})
		if got := g.DefaultParams(); got.MinGuidance != tc.wantMin || got.MaxGuidance != tc.wantMax {
			t.Errorf("folder %v: default guidance %v -> %v, want %v -> %v", tc.folder, got.MinGuidance, got.MaxGuidance, tc.wantMin, tc.wantMax)
		}
	}
}
