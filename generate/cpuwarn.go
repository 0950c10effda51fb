package generate

import (
	"fmt"
	"strings"

	"github.com/vdpp/vdpp/model/nn/backendspec"
)

// largeFramePixels is the frame size (height x width) from which a model's default video
// is too large to take unasked on a CPU: Wan's 480x832 (WanPipeline's defaults, with 81
// frames and 50 steps) and SVD's 576x1024 are above it, the built-in model's 64x64 far below.
const largeFramePixels = 256 * 256

// unsetSizeFlags names the flags of o (before Resolve) whose 0 leaves the video's size,
// frame count or step count to the model.
func unsetSizeFlags(o Options) []string {
	var out []string
	if o.Height == 0 && o.Width == 0 {
		out = append(out, "--height", "--width")
	}
	if o.NumFrames == 0 {
		out = append(out, "--num-frames")
	}
	if o.Steps == 0 {
		out = append(out, "--steps")
	}
	return out
}

// CPUDefaultsWarning returns a one-line warning when the options as given (before Resolve)
// leave the size, frames or steps to the model, the resolved video is large
// (largeFramePixels or more per frame) and onCPU reports that the backend runs on the CPU;
// "" otherwise. onCPU is only asked when the rest holds.
func CPUDefaultsWarning(given, resolved Options, onCPU func(backend string) bool) string {
	unset := unsetSizeFlags(given)
	if len(unset) == 0 || resolved.Height*resolved.Width < largeFramePixels || !onCPU(resolved.Backend) {
		return ""
	}
	return fmt.Sprintf("vdpp generate: warning: %s unset, so the model's defaults run: %dx%d, %d frames, %d steps, on the CPU, which is very slow; give smaller values or a GPU backend",
		strings.Join(unset, " "), resolved.Height, resolved.Width, resolved.NumFrames, resolved.Steps)
}

// OnCPU reports whether the backend spec resolves to one that computes on the CPU: simplego,
// or an XLA plugin that is not CUDA. A spec that does not resolve reports false (the
// workers report that error).
func OnCPU(backend string) bool {
	r, err := backendspec.Resolve(backend, backendspec.OSProbe())
	return err == nil && (r.Kind == backendspec.KindGo || !r.CUDA)
}
