package vae

import (
	"testing"

	"github.com/vdpp/vdpp/internal/configfuzz"
)

func FuzzParseConfig(f *testing.F) {
	configfuzz.AddSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(configfuzz.FileName, data)
		configfuzz.CheckErr(t, err)
		if err == nil && (c.NumBlocks() < 1 || c.Validate() != nil) {
			t.Fatalf("accepted invalid config %+v", c)
		}
	})
}
