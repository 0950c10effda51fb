package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/configfuzz"
)

func TestParseSampling(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Sampling
		err      string // substring of the error; "" = accepted
	}{
		{"all keys", `{"min_guidance": 2, "max_guidance": 4, "decode_chunk_size": 7}`, smp(2, 4, 7), ""},
		{"absent keys keep SVD's", `{"decode_chunk_size": 7}`, smp(1, 3, 7), ""},
		{"empty object", `{}`, DefaultSampling, ""},
		{"guidance off", `{"min_guidance": 1, "max_guidance": 1}`, smp(1, 1, 0), ""},
		{"unknown key", `{"max_guidence": 4}`, Sampling{}, "unknown field"},
		{"min above max", `{"min_guidance": 5, "max_guidance": 4}`, Sampling{}, "min_guidance 5 > max_guidance 4"},
		{"min above default max", `{"min_guidance": 3.5}`, Sampling{}, "min_guidance 3.5 > max_guidance 3"},
		{"negative guidance", `{"min_guidance": -1}`, Sampling{}, "negative"},
		{"negative chunk", `{"decode_chunk_size": -7}`, Sampling{}, "decode_chunk_size -7 is negative"},
		{"fractional chunk", `{"decode_chunk_size": 1.5}`, Sampling{}, "decode_chunk_size"},
		{"not an object", `[2, 4]`, Sampling{}, "cannot unmarshal"},
		{"truncated", `{"min_guidance": 2`, Sampling{}, "unexpected EOF"},
		{"trailing data", `{} {}`, Sampling{}, "data after the JSON object"},
		{"generation defaults", `{"num_frames": 17, "height": 96, "width": 160, "steps": 20, "guidance_scale": 5}`,
			Sampling{MinGuidance: 1, MaxGuidance: 3, NumFrames: 17, Height: 96, Width: 160, Steps: 20, GuidanceScale: 5}, ""},
		{"height without width", `{"height": 96}`, Sampling{}, "give both or neither"},
		{"negative steps", `{"steps": -2}`, Sampling{}, "steps -2"},
		{"negative frames", `{"num_frames": -1}`, Sampling{}, "num_frames -1"},
		{"negative scale", `{"guidance_scale": -5}`, Sampling{}, "guidance_scale -5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSampling("m/vdpp_sampling.json", []byte(tc.in))
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrSampling) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "m/vdpp_sampling.json") {
				t.Fatalf("error %v: want ErrSampling naming the file and %q", err, tc.err)
			}
		})
	}
}

func TestReadSampling(t *testing.T) {
	dir := t.TempDir()
	if s, err := ReadSampling(dir); err != nil || s != DefaultSampling {
		t.Fatalf("folder without the file: %+v, %v; want SVD's defaults", s, err)
	}
	if err := os.WriteFile(filepath.Join(dir, SamplingFile), []byte(`{"min_guidance": 2, "max_guidance": 4, "decode_chunk_size": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadSampling(dir); err != nil || s != (smp(2, 4, 7)) {
		t.Fatalf("got %+v, %v", s, err)
	}
	if err := os.WriteFile(filepath.Join(dir, SamplingFile), []byte(`{"min_guidance": "two"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSampling(dir); !errors.Is(err, ErrSampling) || !strings.Contains(err.Error(), filepath.Join(dir, SamplingFile)) {
		t.Fatalf("corrupt file: %v", err)
	}
}

func TestSamplingResolve(t *testing.T) {
	s := Sampling{MinGuidance: 2, MaxGuidance: 4, DecodeChunkSize: 7}
	for _, tc := range []struct {
		minG, maxG float64
		chunk      int
		want       Sampling
	}{
		{-1, -1, -1, s},           // all left to the model
		{1, 3, 0, smp(1, 3, 0)},   // all given (0 = all frames is a choice, not "unset")
		{-1, 6, -1, smp(2, 6, 7)}, // mixed
		{0.5, -1, 14, smp(0.5, 4, 14)},
	} {
		minG, maxG, chunk := s.Resolve(tc.minG, tc.maxG, tc.chunk)
		if got := smp(minG, maxG, chunk); got != tc.want {
			t.Errorf("Resolve(%v, %v, %d) = %+v, want %+v", tc.minG, tc.maxG, tc.chunk, got, tc.want)
		}
	}
}

func FuzzParseSampling(f *testing.F) {
	for _, s := range []string{`{}`, `{"min_guidance": 2, "max_guidance": 4, "decode_chunk_size": 7}`, `{"num_frames": 17, "height": 96, "width": 160, "steps": 20, "guidance_scale": 5}`, `{"min_guidance": 1e400}`, `null`, `[]`, `{"a":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSampling("fz.json", data)
		configfuzz.CheckErr(t, err)
		if err == nil && s.Validate() != nil {
			t.Fatalf("accepted %+v, which Validate refuses", s)
		}
	})
}

// smp is a Sampling of guidance and decode chunk only.
func smp(minG, maxG float64, chunk int) Sampling {
	return Sampling{MinGuidance: minG, MaxGuidance: maxG, DecodeChunkSize: chunk}
}
