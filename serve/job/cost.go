package job

import (
	"errors"
	"fmt"
	"math"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/pipeline"
)

// ErrCostLimit marks a job the served model cannot run within its cost limits (too many
// pixels, too much denoising work, too much working memory a step). It also wraps
// ErrTooLarge, so both APIs answer it 413.
var ErrCostLimit = errors.New("serve: job exceeds the model's cost limits")

// DefaultCostMultiple is --max-cost-multiple's default: a job may cost up to four times a
// generation at the model's own defaults (native size, frame count and steps).
const DefaultCostMultiple = 4

// Cost is what one job asks of the served model.
type Cost struct {
	Pixels int64 // height·width
	Frames int64 // num_frames
	Steps  int64 // denoising steps
	// Work is Pixels·Frames·Steps: the denoising work, which sets the job's run time. A
	// long video cut into temporal windows counts every window's frames (the frames two
	// windows share twice).
	Work int64
	// ActivationBytes estimates the working memory of one denoising step (see
	// ActivationFunc); the process running the step needs it on top of the weights. A
	// long video's step runs one window at a time, so it costs one window's: flat in the
	// video's length.
	ActivationBytes int64
	// InputBytes is the memory of the job's input image decoded (width × height × the
	// bytes a pixel of its colour model takes, known from its header; 0 for a prompt).
	// The coordinator holds it while it prepares the job, in its own share of the
	// machine's memory (Machine.StepMemory), so it must fit that share; it is not held to
	// the model's multiple of its native step, which says nothing about images. JobCost
	// leaves it 0: the caller that has the image sets it.
	InputBytes int64
}

// ActivationFunc estimates the working bytes of one denoising step of a job with p, from
// the served model's real sizes (family.ActivationEstimator where the family has one); a
// long video's step is one window's (family.Params.StepParams).
type ActivationFunc func(p Params) int64

// JobCost returns the cost of a job with p for a model whose step's working memory act
// estimates. JobCost is pure.
func JobCost(p Params, act ActivationFunc) Cost {
	c := Cost{Pixels: int64(p.Height) * int64(p.Width), Frames: int64(p.NumFrames), Steps: int64(p.Steps)}
	denoised := c.Frames
	if p.Window > 0 && p.NumFrames > p.Window {
		// Windows of p.Window frames in video frames (a latent cut differs by rounding only).
		if starts, err := (pipeline.Windows{Size: p.Window, Overlap: p.Overlap, Blend: "linear"}).Starts(p.NumFrames); err == nil {
			denoised = int64(len(starts) * p.Window)
		}
	}
	c.Work = satMul(satMul(c.Pixels, denoised), c.Steps)
	if act != nil {
		c.ActivationBytes = act(p) // a long video's step is one window's (family.Params.StepParams)
	}
	return c
}

// CostLimits bound a job's Cost for one served model; a zero field is no limit. Native is
// the generation they were derived from (the model's defaults).
type CostLimits struct {
	Multiple           float64 `json:"cost_multiple"`
	MaxPixels          int64   `json:"max_pixels"`
	MaxWork            int64   `json:"max_work"`
	MaxActivationBytes int64   `json:"max_activation_bytes"`
	// Machine is the memory the limits were fitted to (WithMachine); MaxActivationBytes is
	// at most its StepMemory.
	Machine Machine `json:"machine"`
	Native  Params  `json:"-"`
}

// Machine is what a server's jobs run on: the memory of the host (or of the device the
// workers compute on), the weight bytes its processes hold (the coordinator's conditioner
// and decoder, each worker rank's denoiser) and how many worker ranks may run a step at
// once.
type Machine struct {
	// MemoryBytes is the memory the processes share; 0 is unknown (no memory limit).
	MemoryBytes int64 `json:"memory_bytes"`
	WeightBytes int64 `json:"weight_bytes"`
	Ranks       int   `json:"ranks"`
}

// UsableMemory is the part of a machine's memory jobs may count on; the rest is the
// operating system's, the runtime's and the buffers'.
const UsableMemory = 0.85

// StepMemory is the working memory one job's step (or its decode) may take on m: the
// usable memory the weights leave, shared by the ranks that may each run a step at once
// (the coordinator's decode counts as one more). It is 0 when the memory is unknown and
// -1 when the weights alone do not fit. StepMemory is pure.
func (m Machine) StepMemory() int64 {
	if m.MemoryBytes <= 0 {
		return 0
	}
	free := int64(float64(m.MemoryBytes)*UsableMemory) - m.WeightBytes
	if free <= 0 {
		return -1
	}
	return free / int64(max(m.Ranks, 0)+1)
}

// WithMachine fits l to m: the step memory limit is the smaller of l's and what m can give
// one step (StepMemory), so a model whose native job is large is not admitted beyond the
// machine. An unknown memory leaves l's limit. WithMachine is pure.
func (l CostLimits) WithMachine(m Machine) CostLimits {
	l.Machine = m
	if sm := m.StepMemory(); sm != 0 && (l.MaxActivationBytes <= 0 || max(sm, 1) < l.MaxActivationBytes) {
		l.MaxActivationBytes = max(sm, 1)
	}
	return l
}

// DeriveCostLimits derives a model's limits from its defaults native and its step memory
// act: with m = multiple, a job may have m times native's pixels, m times native's work
// (pixels·frames·steps), and the step memory of the larger of native at m times the
// pixels (height and width each times √m) and native at m times the frames. A multiple
// of zero or less gives no limits. DeriveCostLimits is pure.
func DeriveCostLimits(native Params, act ActivationFunc, multiple float64) CostLimits {
	if multiple <= 0 || math.IsNaN(multiple) || math.IsInf(multiple, 0) {
		return CostLimits{Native: native}
	}
	base := JobCost(native, act)
	l := CostLimits{Multiple: multiple, Native: native,
		MaxPixels: scale(base.Pixels, multiple), MaxWork: scale(base.Work, multiple)}
	if act != nil {
		wide, long := native, native
		side := math.Sqrt(multiple)
		wide.Height, wide.Width = roundDown8(float64(native.Height)*side), roundDown8(float64(native.Width)*side)
		long.NumFrames = max(1, int(float64(native.NumFrames)*multiple))
		l.MaxActivationBytes = max(act(wide), act(long), base.ActivationBytes)
	}
	return l
}

// CostError is a job over its model's CostLimits; Param names the native parameter whose
// value goes furthest beyond the model's defaults ("size", "num_frames" or "steps").
type CostError struct {
	Param string
	Msg   string
}

func (e *CostError) Error() string   { return ErrCostLimit.Error() + ": " + e.Msg }
func (e *CostError) Unwrap() []error { return []error{ErrCostLimit, ErrTooLarge} }

// Check returns a *CostError when c is beyond l, nil otherwise. Check is pure.
func (l CostLimits) Check(c Cost) error {
	n := l.Native
	nativePixels := max(int64(n.Height)*int64(n.Width), 1)
	ratios := map[string]float64{
		"size":       float64(c.Pixels) / float64(nativePixels),
		"num_frames": float64(c.Frames) / float64(max(n.NumFrames, 1)),
		"steps":      float64(c.Steps) / float64(max(n.Steps, 1)),
	}
	worst := func(params ...string) string {
		best := params[0]
		for _, p := range params[1:] {
			if ratios[p] > ratios[best] {
				best = p
			}
		}
		return best
	}
	native := fmt.Sprintf("the model's native job is %dx%d, %d frames, %d steps", n.Width, n.Height, n.NumFrames, n.Steps)
	switch {
	case l.MaxPixels > 0 && c.Pixels > l.MaxPixels:
		return &CostError{Param: "size", Msg: fmt.Sprintf("%d pixels a frame exceeds this model's limit of %d (%s)",
			c.Pixels, l.MaxPixels, native)}
	case l.MaxWork > 0 && c.Work > l.MaxWork:
		return &CostError{Param: worst("size", "num_frames", "steps"), Msg: fmt.Sprintf(
			"pixels x frames x steps = %d exceeds this model's limit of %d (%s)", c.Work, l.MaxWork, native)}
	case l.MaxActivationBytes > 0 && c.ActivationBytes > l.MaxActivationBytes:
		m := l.Machine
		if sm := m.StepMemory(); sm != 0 && max(sm, 1) == l.MaxActivationBytes {
			return &CostError{Param: worst("size", "num_frames"), Msg: fmt.Sprintf(
				"a denoising step (or its decode) needs about %s of working memory, over the %s a step may use on this server "+
					"(%s of memory, %.0f%% usable, %s of weights held, %d worker rank(s) and the decoder sharing the rest; %s)",
				mib(c.ActivationBytes), mib(l.MaxActivationBytes), mib(m.MemoryBytes), 100*UsableMemory, mib(m.WeightBytes), m.Ranks, native)}
		}
		return &CostError{Param: worst("size", "num_frames"), Msg: fmt.Sprintf(
			"a denoising step (or its decode) needs about %s of working memory, over this model's limit of %s (%s)",
			mib(c.ActivationBytes), mib(l.MaxActivationBytes), native)}
	case l.Machine.StepMemory() > 0 && c.InputBytes > l.Machine.StepMemory():
		m := l.Machine
		return &CostError{Param: "image", Msg: fmt.Sprintf(
			"the image needs about %s of memory decoded, over the %s a step (or an image's decode) may use on this server "+
				"(%s of memory, %.0f%% usable, %s of weights held, %d worker rank(s) and the coordinator sharing the rest): send a smaller image",
			mib(c.InputBytes), mib(m.StepMemory()), mib(m.MemoryBytes), 100*UsableMemory, mib(m.WeightBytes), m.Ranks)}
	}
	return nil
}

// satMul is a·b for non-negative a and b, saturating at MaxInt64.
func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// scale is n·m rounded down, saturating at MaxInt64.
func scale(n int64, m float64) int64 {
	if f := float64(n) * m; f < math.MaxInt64 {
		return int64(f)
	}
	return math.MaxInt64
}

func roundDown8(x float64) int { return max(8, int(x)/8*8) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// DeriveMaxFrames is --max-frames' default for a model with limits l: the frames the
// work limit allows at the model's native size and steps (l.Multiple times its native
// frame count, so a long video of windows fits), and never fewer than DefaultLimits'.
// DeriveMaxFrames is pure.
func DeriveMaxFrames(l CostLimits) int {
	floor := DefaultLimits().MaxFrames
	if l.Multiple <= 0 || l.Native.NumFrames <= 0 {
		return floor
	}
	return max(floor, int(float64(l.Native.NumFrames)*l.Multiple))
}

// ModelLimits are the limits the served model's jobs are admitted under, with the native
// job they derive from (GET /v1/limits, and "vdpp_limits" in GET /v1/models), and what a
// job conditions the model on (the web page shows the fields that fit).
type ModelLimits struct {
	// Input is what a job gives the model: InputImage or InputText. Image and LastImage
	// say whether it takes an image and a last image: "required", "optional" or "none"
	// (a Wan image-to-video model's Input is InputText, its Image "required").
	Input         string `json:"input"`
	Image         string `json:"image"`
	LastImage     string `json:"last_image"`
	NativeWidth   int    `json:"native_width"`
	NativeHeight  int    `json:"native_height"`
	NativeFrames  int    `json:"native_frames"`
	NativeSteps   int    `json:"native_steps"`
	MaxFrames     int    `json:"max_frames"`
	MaxResolution int    `json:"max_resolution"`
	MaxSteps      int    `json:"max_steps"`
	// CacheModes are the step cache modes the model offers besides none (a job's cache
	// parameter, docs/caching.md).
	CacheModes []string `json:"cache_modes,omitempty"`
	// Knobs are the job parameters the model takes (its family's knob table), each with
	// the value a job that leaves it out gets: the web page builds its form from them.
	Knobs []KnobInfo `json:"knobs"`
	// Inputs are the inputs a job gives the model (the model's knob.Inputs: each one's
	// native part, OpenAI field and need): the web page builds its inputs from them.
	Inputs knob.Inputs `json:"inputs"`
	// MaxQueue is the queue's places, shared between clients (each its share, one at
	// least); MaxPrepares the jobs prepared at once (image decode and resize,
	// conditioning), beside the denoising.
	MaxQueue    int `json:"max_queue"`
	MaxPrepares int `json:"max_prepares"`
	// Defaults are what a job that leaves its size, length and steps out gets: the
	// model's native job, or the largest this server fitted to its memory and its time
	// budget, DefaultsWhy saying why ("" when they are the model's own).
	Defaults    DefaultJob `json:"defaults"`
	DefaultsWhy string     `json:"defaults_why,omitempty"`
	// Schedulers are the samplers the model offers (a job's scheduler parameter), its
	// folder's own first; FlowShift is the folder's flow shift (0: not a flow model, which
	// takes no flow_shift).
	Schedulers []string `json:"schedulers,omitempty"`
	FlowShift  float64  `json:"flow_shift,omitempty"`
	// LoRAs are the LoRA files a job may name in lora and lora_2 (the server's --lora-dir);
	// nil when the server takes none.
	LoRAs []string `json:"loras,omitempty"`
	CostLimits
}

// DefaultJob is a job's size, length and steps.
type DefaultJob struct {
	Width     int `json:"width"`
	Height    int `json:"height"`
	NumFrames int `json:"num_frames"`
	Steps     int `json:"steps"`
}

// KnobInfo is a knob of the served model with its default value (GET /v1/limits).
type KnobInfo struct {
	knob.Knob
	Default any `json:"default"`
}

// Knobs describes table t's knobs with their values in defaults.
func Knobs(t knob.Table, defaults Params) []KnobInfo {
	out := make([]KnobInfo, 0, len(t))
	for _, k := range t.Sorted() {
		v, _ := t.Get((*family.Params)(&defaults), k.Name)
		out = append(out, KnobInfo{Knob: k, Default: v})
	}
	return out
}

// The values of ModelLimits.Input.
const (
	// InputImage: a job gives an image (image-to-video, SVD); a prompt is only recorded.
	InputImage = "image"
	// InputText: a job gives a prompt and an optional negative prompt, no image
	// (text-to-video, Wan).
	InputText = "text"
)

// DiskBytes bounds the disk a job of p fills: its frames as 8-bit RGB once for the MP4
// and once for the GIF (each smaller compressed), the final latent (a small fraction of
// that for a VAE that compresses space), the thumbnail and sprite sheet, and its record.
// DiskBytes is pure.
func DiskBytes(p Params) int64 {
	pixels := satMul(int64(max(p.Height, 0))*int64(max(p.Width, 0)), int64(max(p.NumFrames, 0)))
	return min(satMul(pixels, 7), math.MaxInt64-1<<20) + 1<<20
}

// DeriveMinFreeBytes is --min-free-space's default for a model whose native job is native:
// room for four of its jobs, and at least 256 MiB. DeriveMinFreeBytes is pure.
func DeriveMinFreeBytes(native Params) int64 {
	return max(256<<20, satMul(DiskBytes(native), 4))
}
