package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/vdpp/vdpp/model/family"
)

// ErrBadParams marks a request whose JSON parameters are malformed or out of range.
var ErrBadParams = errors.New("serve: bad parameters")

// ErrTooLarge marks a request beyond the server's limits (frames, resolution, steps).
var ErrTooLarge = errors.New("serve: request exceeds a server limit")

// Params are a job's generation parameters: the model family's (family.Params), the
// same knobs as `vdpp generate`, in the job's JSON. Fields a job leaves out take the served
// model's defaults (Model.DefaultParams).
type Params family.Params

// RunSpec is the part of a job's parameters a worker builds its step runner from besides
// the steps: the sampler choice and the LoRAs, as canonical JSON ("" for the model's defaults). Jobs
// batch together only with the same run spec.
func (p Params) RunSpec() string {
	r := runSpec{p.SchedulerChoice, p.LoRAs}
	if r.SchedulerChoice == (family.SchedulerChoice{}) && r.LoRAs.Empty() {
		return ""
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // strings and finite float64s always marshal
	}
	return string(b)
}

// runSpec is what RunSpec encodes.
type runSpec struct {
	family.SchedulerChoice
	family.LoRAs
}

// ParseRunSpec reads what RunSpec wrote into the parameters it sets.
func ParseRunSpec(spec string) (Params, error) {
	var p Params
	if spec == "" {
		return p, nil
	}
	dec := json.NewDecoder(strings.NewReader(spec))
	dec.DisallowUnknownFields()
	var r runSpec
	if err := dec.Decode(&r); err != nil {
		return Params{}, fmt.Errorf("%w: run spec %q: %v", ErrBadParams, spec, err)
	}
	p.SchedulerChoice, p.LoRAs = r.SchedulerChoice, r.LoRAs
	return p, nil
}

// Guided reports whether the job runs classifier-free guidance (max guidance > 1, as SVD).
func (p Params) Guided() bool { return p.MaxGuidance > 1 }

// Limits bound what a request may ask for; the flags --max-frames, --max-resolution,
// --max-steps and --max-body-bytes set them.
type Limits struct {
	MaxFrames      int   // frames per video (0 in a Config: derived from the model, see DeriveMaxFrames)
	MaxResolution  int   // largest of height and width, in pixels
	MaxSteps       int   // denoising steps
	MaxBodyBytes   int64 // whole request body
	MaxImagePixels int   // decoded input image width*height (0 in a Config: derived from the model, see DeriveMaxImagePixels)
}

// DefaultLimits are the server's limits unless flags say otherwise.
func DefaultLimits() Limits {
	return Limits{MaxFrames: 25, MaxResolution: 1024, MaxSteps: 50, MaxBodyBytes: 10 << 20, MaxImagePixels: 4096 * 4096}
}

// DeriveMaxImagePixels is --max-image-pixels' default for a model whose native job is
// native: 16 times its pixels (four times its width and height), and at least a megapixel.
// An input image costs the coordinator work in proportion to its pixels and to how far it
// is scaled down (the resize before the image encoder filters every input pixel), and the
// coordinator prepares jobs one at a time, so one huge image would stall everyone's jobs.
// DeriveMaxImagePixels is pure.
func DeriveMaxImagePixels(native Params) int {
	return max(1<<20, 16*max(native.Height, 0)*max(native.Width, 0))
}

// ParseParams decodes a job's JSON parameters over base (the served model's defaults) and
// validates them against lim. Unknown fields, trailing data, wrong types and out-of-range
// values wrap ErrBadParams; values beyond lim wrap ErrTooLarge. An empty body means all
// defaults. The model's own checks are Model.ParseParams'.
func ParseParams(data []byte, base Params, lim Limits) (Params, error) {
	p := base
	if len(bytes.TrimSpace(data)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return Params{}, fmt.Errorf("%w: %v", ErrBadParams, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return Params{}, fmt.Errorf("%w: trailing data after the JSON object", ErrBadParams)
		}
	}
	if err := p.Validate(lim); err != nil {
		return Params{}, err
	}
	return p, nil
}

// Validate checks ranges (ErrBadParams) and the server's limits (ErrTooLarge).
func (p Params) Validate(lim Limits) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadParams}, args...)...)
	}
	big := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrTooLarge}, args...)...)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case p.NumFrames < 1:
		return bad("num_frames %d must be at least 1", p.NumFrames)
	case p.Steps < 1:
		return bad("steps %d must be at least 1", p.Steps)
	case p.Height < 8 || p.Width < 8 || p.Height%8 != 0 || p.Width%8 != 0:
		return bad("height %d and width %d must be positive multiples of 8", p.Height, p.Width)
	case !finite(p.MinGuidance) || !finite(p.MaxGuidance) || p.MinGuidance < 0 || p.MaxGuidance < 0 || p.MinGuidance > 100 || p.MaxGuidance > 100:
		return bad("guidance min %v max %v must be in [0, 100]", p.MinGuidance, p.MaxGuidance)
	case p.FPS < 1 || p.FPS > 240:
		return bad("fps %d must be in [1, 240]", p.FPS)
	case p.MotionBucketID < 0 || p.MotionBucketID > 1023:
		return bad("motion_bucket_id %d must be in [0, 1023]", p.MotionBucketID)
	case !finite(p.NoiseAugStrength) || p.NoiseAugStrength < 0 || p.NoiseAugStrength > 10:
		return bad("noise_aug_strength %v must be in [0, 10]", p.NoiseAugStrength)
	case p.DecodeChunkSize < 0:
		return bad("decode_chunk_size %d must not be negative", p.DecodeChunkSize)
	case p.Seed < 0:
		return bad("seed %d must not be negative", p.Seed)
	}
	switch {
	case lim.MaxFrames > 0 && p.NumFrames > lim.MaxFrames:
		return big("num_frames %d exceeds --max-frames %d", p.NumFrames, lim.MaxFrames)
	case lim.MaxResolution > 0 && max(p.Height, p.Width) > lim.MaxResolution:
		return big("%dx%d exceeds --max-resolution %d", p.Width, p.Height, lim.MaxResolution)
	case lim.MaxSteps > 0 && p.Steps > lim.MaxSteps:
		return big("steps %d exceeds --max-steps %d", p.Steps, lim.MaxSteps)
	}
	return nil
}

// ParseModelParams parses a job's JSON parameters for a model: over its defaults,
// checked against lim (ErrTooLarge beyond, ErrBadParams out of range) and by check (the
// family's Validate, may be nil). A video longer than the model's native length is cut
// into temporal windows: window, overlap (left out: the model's) and blend are resolved
// against the model's Description and refused with one ErrBadParams line when it cannot
// run them; a job of one window keeps them zero.
func ParseModelParams(data []byte, defaults Params, desc family.Description, check func(family.Params) error, lim Limits) (Params, error) {
	p, err := ParseParams(data, defaults, lim)
	if err != nil {
		return Params{}, err
	}
	if check != nil {
		if err := check(family.Params(p)); err != nil {
			return Params{}, fmt.Errorf("%w: %s", ErrBadParams, strings.TrimPrefix(err.Error(), family.ErrParams.Error()+": "))
		}
	}
	given, err := hasField(data, "overlap")
	if err != nil {
		return Params{}, err
	}
	switch {
	case !given:
		p.Overlap = -1 // the model's
	case p.Overlap < 0:
		return Params{}, fmt.Errorf("%w: overlap %d must not be negative", ErrBadParams, p.Overlap)
	}
	r, err := desc.ResolveWindows(family.Params(p), "")
	if err != nil {
		return Params{}, fmt.Errorf("%w: %s", ErrBadParams, strings.TrimPrefix(err.Error(), family.ErrParams.Error()+": "))
	}
	if r.NumFrames <= r.Window {
		r.Window, r.Overlap, r.Blend = 0, 0, ""
	}
	return Params(r), nil
}

// hasField reports whether the JSON object data sets key (data has already been parsed).
func hasField(data []byte, key string) (bool, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return false, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return false, fmt.Errorf("%w: %v", ErrBadParams, err)
	}
	_, ok := m[key]
	return ok, nil
}
