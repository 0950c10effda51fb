package procedural_test

import (
	"fmt"
	"math"

	"github.com/vdpp/vdpp/data/procedural"
)

func ExampleVideo() {
	c := procedural.DefaultConfig()
	frames := procedural.Video(c, 1, procedural.HeldOut, 0)
	s := procedural.NewScene(c, 1, procedural.HeldOut, 0)
	o := s.At(c, 13)[0]
	vx, vy := procedural.Velocity(o.Colour, o.Shape)
	fmt.Println(len(frames), frames[0].Bounds().Dx(), frames[0].Bounds().Dy())
	fmt.Printf("shape %d moves %.1f px/frame\n", o.Shape, math.Hypot(vx, vy))
	// Output:
	// 14 64 64
	// shape 1 moves 1.5 px/frame
}
