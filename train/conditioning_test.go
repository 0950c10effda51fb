package train

import (
	"bytes"
	"testing"

	"github.com/vdpp/vdpp/data/procedural"
)

// TestFirstFrameIsTheClipsFrame: the image the UNet phase conditions on is frame 0 of the
// very clip it denoises, under every rule. (An earlier heading-rule UNet was trained
// on the colour rule's scene of the same index, because the conditioning frame was drawn
// from a config rebuilt without its rule.)
func TestFirstFrameIsTheClipsFrame(t *testing.T) {
	for _, rule := range []procedural.Rule{procedural.ColourRule, procedural.HeadingRule} {
		dc := procedural.ConfigFor(rule)
		f := &frozen{dc: dc, data: 3, split: procedural.Train}
		for _, i := range []int{0, 5, 17} {
			want := procedural.Video(dc, 3, procedural.Train, i)[0]
			if got := f.firstFrame(i); !bytes.Equal(got.Pix, want.Pix) {
				t.Errorf("%v clip %d: the conditioning frame is not the clip's frame 0", rule, i)
			}
		}
	}
}
