package sched

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// sharedFile finds rel (e.g. "svd/vectors.json") under $VDPP_SHARED or under a "shared"
// directory in the package directory or any parent. When it is missing the test is
// skipped, unless the CI environment variable is set, where it fails.
func sharedFile(t *testing.T, rel string) string {
	t.Helper()
	var cands []string
	if d := os.Getenv("VDPP_SHARED"); d != "" {
		cands = append(cands, filepath.Join(d, rel))
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			cands = append(cands, filepath.Join(d, "shared", rel))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("reference file shared/%s not found (looked in %v)", rel, cands)
	}
	t.Skipf("reference file shared/%s not found; set VDPP_SHARED (required when CI is set)", rel)
	return ""
}

// refVectors is the subset of shared/svd/vectors.json the tests use.
type refVectors struct {
	Schedules map[string]struct {
		NumInferenceSteps int          `json:"num_inference_steps"`
		SigmasF32         []float32    `json:"sigmas_f32"`
		SigmasF64         []float64    `json:"sigmas_f64_before_f32_cast"`
		TimestepsF32      []float32    `json:"timesteps_f32"`
		InitNoiseSigmaF32 float32      `json:"init_noise_sigma_f32"`
		Steps             []refStep    `json:"euler_v_prediction_3_steps"`
		CFG               *refCFGSteps `json:"euler_v_prediction_3_steps_with_cfg_T2"`
	} `json:"schedules"`
	LatentShape []int                `json:"latent_shape"`
	Guidance    map[string][]float32 `json:"guidance_scale_linspace_f32"`
	Torch       struct {
		S25 struct {
			Timesteps []float32 `json:"timesteps_f32_torch"`
		} `json:"25"`
		S7 struct {
			Timesteps []float32 `json:"timesteps_f32_torch"`
		} `json:"7"`
		Guidance map[string][]float32 `json:"guidance_scale_linspace_f32_torch"`
	} `json:"diffusers_torch_reference"`
}

type refStep struct {
	StepIndex int       `json:"step_index"`
	Sigma     float32   `json:"sigma"`
	SigmaNext float32   `json:"sigma_next"`
	SampleIn  []float32 `json:"sample_in_f32"`
	Scaled    []float32 `json:"scaled_model_input_f32"`
	ModelOut  []float32 `json:"model_output_f32"`
	PredX0    []float32 `json:"pred_original_sample_f32"`
	Prev      []float32 `json:"prev_sample_f32"`
	PredX0F64 []float64 `json:"pred_original_sample_f64"`
	PrevF64   []float64 `json:"prev_sample_f64"`
}

type refCFGSteps struct {
	Guidance []float32 `json:"guidance_per_frame_f32"`
	Steps    []refStep `json:"steps"`
}

func loadVectors(t *testing.T) *refVectors {
	t.Helper()
	data, err := os.ReadFile(sharedFile(t, "svd/vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v refVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("vectors.json: %v", err)
	}
	return &v
}

// readF32Safetensors reads every F32 tensor of a safetensors file (test-only, minimal).
func readF32Safetensors(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	body := b[8+n:]
	out := map[string][]float32{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			Dtype   string   `json:"dtype"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || e.Dtype != "F32" {
			t.Fatalf("%s: tensor %s: unexpected entry %s (%v)", path, name, raw, err)
		}
		src := body[e.Offsets[0]:e.Offsets[1]]
		v := make([]float32, len(src)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
		out[name] = v
	}
	return out
}

// ulpDiff returns the distance in float32 units in the last place between a and b
// (both finite, same sign assumed for the small distances tests care about).
func ulpDiff(a, b float32) int64 {
	d := int64(int32(math.Float32bits(a))) - int64(int32(math.Float32bits(b)))
	if d < 0 {
		d = -d
	}
	return d
}

// assertBitEqual fails when got and want differ in any bit.
func assertBitEqual(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 3 {
				t.Errorf("%s[%d] = %v (%#x), want %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ", what, bad, len(got))
	}
}
