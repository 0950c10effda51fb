package procedural_test

import (
	"fmt"
	"math"

	"github.com/vdpp/vdpp/data/procedural"
)

func ExampleVideo() {
	c := procedural.ColourConfig()
	frames := procedural.Video(c, 1, procedural.HeldOut, 0)
	o := procedural.NewScene(c, 1, procedural.HeldOut, 0).At(c, 13)[0]
	vx, vy := procedural.Velocity(o.Colour, o.Shape)
	fmt.Println(len(frames), frames[0].Bounds().Dx(), frames[0].Bounds().Dy())
	fmt.Printf("%s rule: shape %d moves %.1f px/frame\n", c.Rule, o.Shape, math.Hypot(vx, vy))

	h := procedural.HeadingConfig()
	a := procedural.NewScene(h, 1, procedural.HeldOut, 0).At(h, 13)[0]
	fmt.Printf("%s rule: arrow moves %.1f px/frame where it points\n", h.Rule, math.Hypot(a.VX, a.VY))
	// Output:
	// 14 64 64
	// colour rule: shape 1 moves 1.5 px/frame
	// heading rule: arrow moves 2.5 px/frame where it points
}
