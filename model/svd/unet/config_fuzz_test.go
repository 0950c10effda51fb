package unet

import (
	"testing"

	"github.com/vdpp/vdpp/internal/configfuzz"
)

func FuzzParseConfig(f *testing.F) {
	configfuzz.AddSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(configfuzz.FileName, data)
		configfuzz.CheckErr(t, err)
		if err != nil {
			return
		}
		// Everything a network builder calls must work on an accepted config.
		n := c.NumBlocks()
		_ = c.TimeEmbedDim() + c.NumAddedTimeIDs()
		for i := 0; i < n; i++ {
			_ = c.HeadDim(i)
			_ = c.DownHasAttention(i) || c.UpHasAttention(i)
			if c.DownHasAttention(i) {
				for l := 0; l < c.LayersPerBlock[i]; l++ {
					_ = c.TransformerLayers(i, l)
				}
			}
			if c.UpHasAttention(n - 1 - i) {
				for l := 0; l <= c.LayersPerBlock[i]; l++ {
					_ = c.TransformerLayers(i, l)
				}
			}
		}
		_ = c.TransformerLayers(n-1, 0)
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
	})
}
