package unet_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model/svd/unet"
)

// ExampleContextParallelSteps shows how ForwardFrames cuts the SVD-XT UNet (576x1024
// video, 72x128 latents): compiled graph segments separated by exchanges between the
// members of the context-parallel group.
func ExampleContextParallelSteps() {
	cfg, err := unet.ParseConfig("unet/config.json", []byte(`{"num_frames": 25}`))
	if err != nil {
		panic(err)
	}
	segments, exchanges, err := unet.ContextParallelSteps(cfg, 72, 128)
	if err != nil {
		panic(err)
	}
	fmt.Println(segments, "segments,", exchanges, "exchanges")
	// Output:
	// 77 segments, 76 exchanges
}
