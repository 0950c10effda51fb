package wan

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/tensor"
)

// DecodeChunks hands over Decode's frames, bit for bit, one latent frame's worth at a time
// (1 frame, then 4), at the right indices; emit's error stops it and a bad latent is refused.
func TestDecodeChunksEqualsDecode(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	s, err := Load(dir, family.Options{Roles: family.Roles{Decode: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, size := range [][3]int{{9, 32, 32}, {13, 16, 48}} {
		p := s.DefaultParams()
		p.NumFrames, p.Height, p.Width = size[0], size[1], size[2]
		latent := tensor.New(s.LatentShape(p)...)
		r := rand.New(rand.NewPCG(1, uint64(size[0])))
		for i := range latent.Data {
			latent.Data[i] = float32(r.NormFloat64())
		}
		whole, err := s.Decode(ctx, latent, p)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{p.NumFrames, 3, p.Height, p.Width}; !slices.Equal(whole.Shape, want) {
			t.Fatalf("Decode: %v, want %v", whole.Shape, want)
		}
		var firsts, sizes []int
		var got []float32
		err = s.DecodeChunks(ctx, latent, p, func(first int, f *tensor.Dense) error {
			if !slices.Equal(f.Shape[1:], whole.Shape[1:]) {
				t.Fatalf("chunk %v", f.Shape)
			}
			firsts, sizes = append(firsts, first), append(sizes, f.Shape[0])
			got = append(got, f.Data...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, whole.Data) {
			t.Errorf("%v: DecodeChunks' frames differ from Decode's", size)
		}
		wantFirsts, wantSizes := []int{0}, []int{1}
		for f := 1; f < p.NumFrames; f += 4 {
			wantFirsts, wantSizes = append(wantFirsts, f), append(wantSizes, 4)
		}
		if !slices.Equal(firsts, wantFirsts) || !slices.Equal(sizes, wantSizes) {
			t.Errorf("%v: chunks at %v of %v, want %v of %v", size, firsts, sizes, wantFirsts, wantSizes)
		}
	}

	p := s.DefaultParams()
	p.NumFrames, p.Height, p.Width = 5, 16, 16
	latent := tensor.New(s.LatentShape(p)...)
	stop := errors.New("stop")
	calls := 0
	if err := s.DecodeChunks(ctx, latent, p, func(int, *tensor.Dense) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("emit's error: %v after %d calls", err, calls)
	}
	p.NumFrames = 9
	if err := s.DecodeChunks(ctx, latent, p, func(int, *tensor.Dense) error { return nil }); err == nil {
		t.Error("a latent of the wrong length was decoded")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.DecodeChunks(cancelled, latent, p, func(int, *tensor.Dense) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
