package clip

import (
	"testing"

	"github.com/vdpp/vdpp/internal/configfuzz"
)

func FuzzParseConfig(f *testing.F) {
	configfuzz.AddSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(configfuzz.FileName, data)
		configfuzz.CheckErr(t, err)
		if err == nil && (c.HeadDim()*c.NumAttentionHeads != c.HiddenSize || c.NumPositions() < 2) {
			t.Fatalf("accepted inconsistent config %+v", c)
		}
	})
}

func FuzzParseFeatureExtractorConfig(f *testing.F) {
	configfuzz.AddSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseFeatureExtractorConfig(configfuzz.FileName, data)
		configfuzz.CheckErr(t, err)
		if err == nil && len(c.ImageMean) != len(c.ImageStd) {
			t.Fatalf("accepted config %+v", c)
		}
	})
}
