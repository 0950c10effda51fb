package family_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	_ "github.com/vdpp/vdpp/model/families"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/tensor"
)

// TestDecodePartsJoinToDecode: the built-in model's decode chunks, decoded one by one and
// joined, give Decode's bits exactly, for a chunk that leaves a short last chunk and for
// chunks that cover every frame (one part).
func TestDecodePartsJoinToDecode(t *testing.T) {
	s, err := family.Open("builtin", family.Options{Roles: family.Roles{Decode: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := s.DefaultParams()
	p.NumFrames, p.Height, p.Width = 5, 16, 16 // small: the test is about bits, not size
	r := rand.New(rand.NewPCG(1, 2))
	lat := tensor.New(s.LatentShape(p)...)
	for i := range lat.Data {
		lat.Data[i] = float32(r.NormFloat64())
	}
	ctx := context.Background()
	for _, tc := range []struct{ chunk, parts int }{{0, 1}, {9, 1}, {2, 3}} {
		p.DecodeChunkSize = tc.chunk
		if n := family.DecodeParts(s, p); n != tc.parts {
			t.Fatalf("chunk %d: %d parts, want %d", tc.chunk, n, tc.parts)
		}
		whole, err := s.Decode(ctx, lat, p)
		if err != nil {
			t.Fatal(err)
		}
		var parts []*tensor.Dense
		for i := range tc.parts {
			part, err := family.DecodePart(ctx, s, lat, p, i)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, part)
		}
		joined, err := family.JoinParts(parts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(joined.Shape, whole.Shape) || !slices.Equal(joined.Data, whole.Data) {
			t.Fatalf("chunk %d: joined parts %v differ from Decode %v", tc.chunk, joined.Shape, whole.Shape)
		}
	}
	if _, err := family.DecodePart(ctx, s, lat, p, 5); err == nil {
		t.Fatal("part 5 of 5: no error")
	}
}
