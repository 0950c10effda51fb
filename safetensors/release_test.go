package safetensors

import (
	"math"
	"path/filepath"
	"testing"
)

// TestReleaseKeepsData: a released tensor reads back the same bits (its pages come back
// from the file), for every way of opening, and Release of an unknown name or after Close
// is harmless.
func TestReleaseKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.safetensors")
	big := make([]float32, 5000) // spans whole pages
	for i := range big {
		big[i] = float32(i) * 0.25
	}
	in := []NamedTensor{{"big", mustDense(t, big, 50, 100)}, {"small", mustDense(t, []float32{1, 2, 3}, 3)}}
	if err := WriteFile(path, in, nil); err != nil {
		t.Fatal(err)
	}
	for how, open := range openers() {
		t.Run(how, func(t *testing.T) {
			f, err := open(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, nt := range in {
				f.Release(nt.Name)
				got, err := f.Float32(nt.Name)
				if err != nil {
					t.Fatal(err)
				}
				for i, v := range nt.Tensor.Data {
					if math.Float32bits(got[i]) != math.Float32bits(v) {
						t.Fatalf("%s[%d] = %g after Release, want %g", nt.Name, i, got[i], v)
					}
				}
			}
			f.Release("nope")
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			f.Release("big")
		})
	}
}
