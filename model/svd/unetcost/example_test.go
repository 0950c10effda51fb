package unetcost_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model/svd/unetcost"
)

// One guided SVD-XT denoiser call at 576x1024 pixels (72x128 latents), 14 frames.
func ExampleCount() {
	c, err := unetcost.Count(unetcost.XTConfig(), unetcost.Shape{Batch: 2, Frames: 14, Height: 72, Width: 128})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d tensors, %.3f G params\n", c.Tensors, float64(c.Params)/1e9)
	fmt.Printf("%.1f TFLOP: conv %.0f%%, linear %.0f%%, attention %.0f%%\n", c.Total/1e12,
		100*c.Conv/c.Total, 100*c.Linear/c.Total, 100*(c.SpatialAttention+c.TemporalAttention)/c.Total)
	// Output:
	// 1428 tensors, 1.525 G params
	// 89.6 TFLOP: conv 35%, linear 45%, attention 19%
}
