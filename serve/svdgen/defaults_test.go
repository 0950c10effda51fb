package svdgen

import (
	"testing"

	"github.com/vdpp/vdpp/model/svd"
)

// TestDefaultDecodeChunk: a job that leaves decode_chunk_size out gets the model spec's.
func TestDefaultDecodeChunk(t *testing.T) {
	for _, chunk := range []int{0, 7} {
		p := &svd.Pipeline{}
		p.UNetConfig.NumFrames = 14
		g := New(p)
		g.decodeChunk = chunk
		if got := g.DefaultParams().DecodeChunkSize; got != chunk {
			t.Errorf("spec chunk %d: default decode_chunk_size %d", chunk, got)
		}
	}
}
