package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
)

// SamplingFile is the name of the optional file at a checkpoint's root that holds the
// sampling settings the model was tuned for. It is vdpp's own file (diffusers ignores
// it): diffusers keeps such defaults in pipeline code, which would make a folder exported
// by `vdpp train` sample differently from the same weights shipped as the built-in model.
const SamplingFile = "vdpp_sampling.json"

// Sampling is a model's default sampling settings: what a caller uses where the user
// leaves a setting to the model.
type Sampling struct {
	MinGuidance     float64 `json:"min_guidance"`      // CFG weight of the first frame
	MaxGuidance     float64 `json:"max_guidance"`      // CFG weight of the last frame
	DecodeChunkSize int     `json:"decode_chunk_size"` // frames the VAE decodes together; 0: all
	// NumFrames, Height, Width, Steps and GuidanceScale, when > 0, replace the family's
	// defaults of a generation that sets none (a small model is tuned, and fast, at sizes
	// far below the released checkpoints' 81 frames at 832x480); 0 keeps the family's.
	// GuidanceScale is a text-to-video family's CFG scale (Wan's guidance_scale).
	NumFrames     int     `json:"num_frames,omitempty"`
	Height        int     `json:"height,omitempty"`
	Width         int     `json:"width,omitempty"`
	Steps         int     `json:"steps,omitempty"`
	GuidanceScale float64 `json:"guidance_scale,omitempty"`
}

// DefaultSampling is SVD's (diffusers' StableVideoDiffusionPipeline): guidance 1 -> 3 and
// all frames decoded together. A folder without SamplingFile samples with it.
var DefaultSampling = Sampling{MinGuidance: 1, MaxGuidance: 3}

// Resolve fills the settings a caller left to the model (negative values) from s and
// returns the others as they are.
func (s Sampling) Resolve(minGuidance, maxGuidance float64, decodeChunk int) (float64, float64, int) {
	if minGuidance < 0 {
		minGuidance = s.MinGuidance
	}
	if maxGuidance < 0 {
		maxGuidance = s.MaxGuidance
	}
	if decodeChunk < 0 {
		decodeChunk = s.DecodeChunkSize
	}
	return minGuidance, maxGuidance, decodeChunk
}

// Validate checks that the settings can be used: finite, non-negative guidance with the
// first frame's no larger than the last's, and non-negative chunk size, sizes, steps and
// guidance scale. Its errors wrap ErrSampling.
func (s Sampling) Validate() error {
	switch {
	case math.IsNaN(s.MinGuidance) || math.IsInf(s.MinGuidance, 0) || math.IsNaN(s.MaxGuidance) || math.IsInf(s.MaxGuidance, 0):
		return fmt.Errorf("%w: guidance %v -> %v is not finite", ErrSampling, s.MinGuidance, s.MaxGuidance)
	case s.MinGuidance < 0 || s.MaxGuidance < 0:
		return fmt.Errorf("%w: guidance %v -> %v is negative", ErrSampling, s.MinGuidance, s.MaxGuidance)
	case s.MinGuidance > s.MaxGuidance:
		return fmt.Errorf("%w: min_guidance %v > max_guidance %v", ErrSampling, s.MinGuidance, s.MaxGuidance)
	case s.DecodeChunkSize < 0:
		return fmt.Errorf("%w: decode_chunk_size %d is negative", ErrSampling, s.DecodeChunkSize)
	case s.NumFrames < 0 || s.Height < 0 || s.Width < 0 || s.Steps < 0:
		return fmt.Errorf("%w: num_frames %d, height %d, width %d, steps %d: none may be negative", ErrSampling, s.NumFrames, s.Height, s.Width, s.Steps)
	case (s.Height == 0) != (s.Width == 0):
		return fmt.Errorf("%w: height %d, width %d: give both or neither", ErrSampling, s.Height, s.Width)
	case math.IsNaN(s.GuidanceScale) || math.IsInf(s.GuidanceScale, 0) || s.GuidanceScale < 0:
		return fmt.Errorf("%w: guidance_scale %v is not a finite scale >= 0", ErrSampling, s.GuidanceScale)
	}
	return nil
}

// ParseSampling decodes a SamplingFile read from file (named in errors). Absent keys keep
// DefaultSampling's values; unknown keys are refused, so a misspelt key is not silently
// ignored.
func ParseSampling(file string, data []byte) (Sampling, error) {
	s := DefaultSampling
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Sampling{}, fmt.Errorf("%w: %s: %w", ErrSampling, file, err)
	}
	if dec.More() {
		return Sampling{}, fmt.Errorf("%w: %s: data after the JSON object", ErrSampling, file)
	}
	if err := s.Validate(); err != nil {
		return Sampling{}, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// ReadSampling reads dir's SamplingFile, or returns DefaultSampling when dir has none.
func ReadSampling(dir string) (Sampling, error) {
	p := filepath.Join(dir, SamplingFile)
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return DefaultSampling, nil
	case err != nil:
		return Sampling{}, fmt.Errorf("%w: %w", ErrSampling, err)
	}
	return ParseSampling(p, b)
}
