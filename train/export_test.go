package train

import (
	"testing"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/model/checkpoint"
)

func TestExportSampling(t *testing.T) {
	base := checkpoint.Sampling{MinGuidance: 2, MaxGuidance: 4, DecodeChunkSize: 7}
	for _, tc := range []struct {
		name      string
		vaeFrames string // "" = not recorded (a checkpoint from before it was)
		want      int
	}{
		{"not recorded: the recipe's", "", 7},
		{"short clips", "2", 2},
		{"the recipe's", "7", 7},
		{"whole clips", "14", 0},
		{"garbage", "seven", 7},
		{"zero", "0", 7},
	} {
		meta := map[string]string{}
		if tc.vaeFrames != "" {
			meta[metaVAEFrames] = tc.vaeFrames
		}
		got := exportSampling(base, meta, 14)
		if got.DecodeChunkSize != tc.want || got.MinGuidance != 2 || got.MaxGuidance != 4 {
			t.Errorf("%s: %+v, want chunk %d with guidance 2 -> 4", tc.name, got, tc.want)
		}
	}
}

// TestRecipeSamplingIsBuiltins: a folder exported by the built-in model's recipe samples
// with the built-in model's defaults.
func TestRecipeSamplingIsBuiltins(t *testing.T) {
	want, err := builtin.Sampling(builtin.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := *TinyConfigs().Sampling; got != want {
		t.Fatalf("TinyConfigs().Sampling = %+v, the built-in model's vdpp_sampling.json %+v", got, want)
	}
}
