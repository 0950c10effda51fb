package knob

import (
	"math"
	"math/rand/v2"
)

// The knobs every family shares (a family's table lists them with its own): the video's
// size, length and frame rate, the steps, the seed, the temporal windows of a long video,
// and the step cache. Their ranges are what the engine can carry and run; a family's
// Validate adds what its folder needs (sizes a multiple of the VAE's factor).

// MaxFrames bounds a video's frames and a window's (what a hand-off's windows carry).
const MaxFrames = 1 << 20

// MaxSteps bounds a job's denoising steps (and a cache schedule's).
const MaxSteps = 10000

// MaxSize bounds a video's height and width in pixels.
const MaxSize = 1 << 14

// RandomSeed is the seed that asks for a random one (as sd.cpp and ComfyUI take -1).
const RandomSeed = -1

// DrawSeed draws a random seed in [0, 2^32): what RandomSeed gives, recorded by the job.
func DrawSeed() int64 { return int64(rand.Uint32()) }

// The cache modes (pipeline's CacheNone, CacheFB, CacheDeep, CacheStatic).
const (
	ModeNone   = "none"
	ModeFB     = "fbcache"
	ModeDeep   = "deepcache"
	ModeStatic = "static"
)

var (
	// NumFrames is the video's length in frames.
	NumFrames = Knob{Name: "num_frames", Kind: Int, Min: 1, Max: MaxFrames, Mesh: Frames, Group: Long,
		Help: "frames of the video; longer than the model's native length, it is made of overlapping temporal windows"}
	// NumSteps is the denoising steps (OpenAI's num_inference_steps).
	NumSteps = Knob{Name: "steps", OpenAI: "num_inference_steps", Kind: Int, Min: 1, Max: MaxSteps, Group: Basic,
		Help: "denoising steps"}
	// Height and Width are the video's size in pixels (a multiple of the model's VAE factor).
	Height = Knob{Name: "height", Kind: Int, With: "width", Min: 1, Max: MaxSize, Group: Basic,
		Help: "video height in pixels, a multiple of the model's size factor; set with width"}
	Width = Knob{Name: "width", Kind: Int, With: "height", Min: 1, Max: MaxSize, Group: Basic,
		Help: "video width in pixels, a multiple of the model's size factor; set with height"}
	// FPS is the video's frame rate (SVD also conditions on it).
	FPS = Knob{Name: "fps", Kind: Int, Min: 1, Max: 240, Group: Basic,
		Help: "frames per second of the video (an SVD model also conditions on it)"}
	// Seed is the noise seed; -1 (and, on the server, a job that leaves it out) draws one at
	// random, which the job records.
	Seed = Knob{Name: "seed", Kind: Int, Min: RandomSeed, Max: math.MaxInt64, Default: "0 on the command line, random on the server", Group: Basic,
		Help: "seed of the initial noise: the same seed gives the same video; -1 draws one at random, recorded with the video"}
	// Window, Overlap and Blend cut a long video into temporal windows.
	Window = Knob{Name: "window", Kind: Int, Min: 1, Max: MaxFrames, Mesh: Windows, Group: Long,
		Help: "frames per temporal window when the video is longer (the model's native length by default)"}
	Overlap = Knob{Name: "overlap", Kind: Int, Min: 0, Max: MaxFrames, Group: Long,
		Help: "frames neighbouring windows share, blended at every step (a quarter of the window by default)"}
	Blend = Knob{Name: "blend", Kind: String, Choices: []string{"cosine", "linear"}, Default: "cosine", Group: Long,
		Help: "how overlapping window frames are blended"}
	// Scheduler and FlowShift are the sampler choice: a sampler the model offers (checked by
	// the model: family.Description.CheckScheduler) and a flow model's schedule shift.
	Scheduler = Knob{Name: "scheduler", Kind: String, Default: "the model's own", Group: Advanced,
		Help: "sampler: flow models (Wan) unipc, euler, dpm++2m, lcm; SVD euler, euler-a, dpm++2m-karras (docs/schedulers.md)"}
	FlowShift = Knob{Name: "flow_shift", Kind: Float, Min: 0, MinOpen: true, Max: 1000, Default: "the model's", Group: Advanced,
		Help: "flow models (Wan): the schedule's shift"}
)

// cacheModes are the modes that cache (every mode but none).
var cacheModes = []string{ModeFB, ModeDeep, ModeStatic}

// CacheKnobs are the step cache's knobs for a family whose denoisers offer modes (a subset
// of fbcache, deepcache, static); none for a family that offers none. Each field applies
// to the modes that read it, of those offered.
func CacheKnobs(modes ...string) Table {
	if len(modes) == 0 {
		return nil
	}
	offered := func(want ...string) []string {
		var out []string
		for _, m := range want {
			for _, o := range modes {
				if m == o {
					out = append(out, m)
				}
			}
		}
		return out
	}
	t := Table{{Name: CacheKnob, Kind: String, Choices: append([]string{ModeNone}, offered(cacheModes...)...), Default: ModeNone, Group: Cache,
		Help: "step cache: reuse denoiser work between steps (docs/caching.md)"}}
	if m := offered(ModeFB); len(m) > 0 {
		t = append(t, Knob{Name: "cache_threshold", Kind: Float, Min: 0, MinOpen: true, Max: 1000, Modes: m, Default: "0.05", Group: Cache,
			Help: "fbcache: compute a call in full when the first block's residual moved more than this (relative) since the last computed call"})
	}
	if m := offered(ModeDeep, ModeStatic); len(m) > 0 {
		t = append(t, Knob{Name: "cache_interval", Kind: Int, Min: 2, Max: MaxSteps, Modes: m, Default: "3", Group: Cache,
			Help: "deepcache: every k-th step in full; static without cache_steps: the same schedule"})
	}
	if m := offered(ModeDeep); len(m) > 0 {
		t = append(t, Knob{Name: "cache_branch", Kind: Int, Min: 0, Max: 64, Modes: m, Default: "0", Group: Cache,
			Help: "deepcache: the skip branch (how deep the reused part starts)"})
	}
	if m := offered(ModeStatic); len(m) > 0 {
		t = append(t, Knob{Name: "cache_steps", Kind: Steps, Min: 0, Max: MaxSteps - 1, Modes: m, Default: "every cache_interval-th step", Group: Cache,
			Help: `static: the steps that compute in full, "0-2,5,9"`})
	}
	return append(t, Knob{Name: "cache_drop", Kind: Bool, Modes: offered(cacheModes...), Default: "false", Group: Cache,
		Help: "drop the cache at stage boundaries instead of carrying it in the hand-off (each stage's first call computes)"})
}

// Common is the table of the knobs every family shares, with the cache knobs of modes.
func Common(modes ...string) Table {
	t := Table{NumFrames, NumSteps, Height, Width, FPS, Seed, Window, Overlap, Blend, Scheduler, FlowShift}
	return append(t, CacheKnobs(modes...)...)
}
