package dummy

import (
	"context"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

// BenchmarkPredict times one row at the bench defaults (Hd 32, C 4, T 4, 16x16).
// Run: go test ./model/dummy -run '^$' -bench Predict -benchtime 20x
func BenchmarkPredict(b *testing.B) {
	d := mustNew(b, Config{HiddenChannels: 32, LatentChannels: 4, Seed: 1})
	in := testInput(1, 1, 4, nil)
	in.Latents = tensor.New(1, 4, 4, 16, 16)
	for b.Loop() {
		if _, err := d.Predict(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}
