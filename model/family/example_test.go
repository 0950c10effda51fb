package family_test

import (
	"context"
	"fmt"
	"slices"

	_ "github.com/vdpp/vdpp/model/families"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/tensor"
)

// Example runs a whole generation in one process through the seam: resolve --model, open
// every role, prepare two samples, step them with the engine's Stepper. (The synthetic
// simulator has no decoder; a model folder's sampler would Decode the latents next.)
func Example() {
	m, err := family.Resolve("synthetic")
	if err != nil {
		panic(err)
	}
	s, err := m.Open(family.Options{Roles: family.AllRoles})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	p := s.DefaultParams()
	p.NumFrames, p.Steps, p.Height, p.Width = 3, 4, 32, 32
	sc, err := s.Scheduler(p)
	if err != nil {
		panic(err)
	}
	it, err := s.Prepare(context.Background(), family.Input{}, p, sc, []int64{0, 1})
	if err != nil {
		panic(err)
	}
	st, err := s.Stepper(sc)
	if err != nil {
		panic(err)
	}
	for it.Step = 0; it.Step < p.Steps; it.Step++ {
		if err := st.Step(context.Background(), it); err != nil {
			panic(err)
		}
	}
	fmt.Println(m.Family.Name(), it.Latent.Shape, len(it.Guidance), "guidance weights")
	// Output: synthetic [2 3 4 4 4] 3 guidance weights
}

// ExampleDecodeParts decodes a sample of the built-in model part by part (its decode
// chunks), as ranks sharing the decode would, and joins the parts: the frames are Decode's.
func ExampleDecodeParts() {
	s, err := family.Open("builtin", family.Options{Roles: family.Roles{Decode: true}})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	p := s.DefaultParams()
	p.NumFrames, p.Height, p.Width, p.DecodeChunkSize = 3, 16, 16, 2
	lat := tensor.New(s.LatentShape(p)...)
	var parts []*tensor.Dense
	for i := range family.DecodeParts(s, p) {
		part, err := family.DecodePart(context.Background(), s, lat, p, i)
		if err != nil {
			panic(err)
		}
		parts = append(parts, part)
	}
	frames, err := family.JoinParts(parts)
	if err != nil {
		panic(err)
	}
	whole, err := s.Decode(context.Background(), lat, p)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(parts), "parts", frames.Shape, "equal to Decode:", slices.Equal(frames.Data, whole.Data))
	// Output: 2 parts [3 3 16 16] equal to Decode: true
}

// A Wan-like model (a causal VAE compressing time by 4, 81 native frames): a 161-frame
// video is cut into the family's windows, in latent frames.
func ExampleDescription_ResolveWindows() {
	d := family.Description{Defaults: family.Params{NumFrames: 81}, FrameMultiple: 4,
		Windowing: family.Windowing{Window: 81, Overlap: 20, Blend: "cosine"}}
	p, err := d.ResolveWindows(family.Params{NumFrames: 161, Overlap: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	w := d.Windows(p, nil)
	starts, _ := w.Starts(d.LatentFrames(p.NumFrames))
	fmt.Printf("video frames: window %d overlap %d %s\n", p.Window, p.Overlap, p.Blend)
	fmt.Printf("latent frames: %d in windows of %d sharing %d, starting at %v\n", d.LatentFrames(p.NumFrames), w.Size, w.Overlap, starts)
	_, err = d.ResolveWindows(family.Params{NumFrames: 161, Window: 80, Overlap: -1})
	// Each surface names the knob in its spelling: flags on the command line, JSON names
	// on the server's native API.
	ke, _ := knob.AsError(err)
	fmt.Println(ke.In(knob.Flags))
	fmt.Println(ke.In(knob.JSON))
	// Output:
	// video frames: window 81 overlap 20 cosine
	// latent frames: 41 in windows of 21 sharing 5, starting at [0 16 20]
	// --window 80: the model's causal VAE compresses time by 4, so a window takes 1 + 4k frames (e.g. 77 or 81)
	// window 80: the model's causal VAE compresses time by 4, so a window takes 1 + 4k frames (e.g. 77 or 81)
}
