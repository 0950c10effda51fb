package svd_test

import (
	"context"
	"image"
	"image/color"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/family/familytest"
	_ "github.com/vdpp/vdpp/model/svd" // registers the family
	"github.com/vdpp/vdpp/tensor"
)

// Every sampler SVD offers (euler, euler-a, dpm++2m-karras) gives the dev checkpoint's
// frames bit for bit on pp2 and cfg2 as on one rank: the ancestral sampler's noise is keyed
// by (seed, sample, step), DPM++ 2M's previous x0 travels in the hand-off, and the
// guidance halves split over cfg ranks are combined as one rank combines them.
func TestSchedulersMeshesMatchOneRank(t *testing.T) {
	dir := shared.Require(t, "golden", "dev")
	r, err := family.ResolveDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := r.Describe()
	if err != nil {
		t.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 32, 32))
	for y := range 32 {
		for x := range 32 {
			img.Set(x, y, color.RGBA{uint8(8 * x), uint8(8 * y), uint8(4 * (x + y)), 255})
		}
	}
	in := family.Input{Image: img}
	for _, name := range desc.SchedulerNames() {
		t.Run(name, func(t *testing.T) {
			p := desc.Defaults
			p.NumFrames, p.Height, p.Width, p.Steps, p.Seed = 2, 16, 16, 3, 5
			p.MinGuidance, p.MaxGuidance, p.DecodeChunkSize = 1, 3, 2
			p.SchedulerChoice = family.SchedulerChoice{Scheduler: name}
			run := func(p family.Params, m familytest.Mesh) *tensor.Dense {
				t.Helper()
				f, err := familytest.Generate(context.Background(), dir, in, p, m, 1)
				if err != nil || f[0] == nil {
					t.Fatalf("%v: %v (frames %v)", m, err, f)
				}
				return f[0]
			}
			want := run(p, familytest.Mesh{})
			if name == "euler-a" { // the sampler that draws noise: its noise follows the seed
				other := p
				other.Seed = 6
				if tensor.BitEqual(run(other, familytest.Mesh{}), want) {
					t.Fatal("seeds 5 and 6 give the same frames")
				}
			}
			for _, m := range []familytest.Mesh{{PP: 2}, {CFG: 2}} {
				if got := run(p, m); !tensor.BitEqual(got, want) {
					t.Errorf("%v differs from one rank (rel L2 %.3g)", m, tensor.RelL2(got, want))
				}
			}
		})
	}
}
