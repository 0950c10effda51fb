package generate

import (
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/video"
)

// StageWeights is what one pipeline stage holds.
type StageWeights struct {
	Rank       int              `json:"rank"`
	Steps      [2]int           `json:"steps"`
	Components map[string]int64 `json:"weight_bytes"`
	// Types are the same bytes by the weight type they are held in ("f32", "q8_0", ...).
	Types  map[string]int64 `json:"weight_bytes_by_type,omitempty"`
	LoadMS float64          `json:"load_ms"`
	// Kernels says which kernels the rank's networks ran with (family.KernelReporter:
	// the backend and, on the pure-Go one, vdpp's CPU kernels); empty for a family that
	// does not say.
	Kernels string `json:"kernels,omitempty"`
}

// Timings are a sample's phases in milliseconds. Load is the slowest rank's model load.
type Timings struct {
	LoadMS         float64 `json:"load_ms"`
	ConditioningMS float64 `json:"conditioning_ms"`
	DiffusionMS    float64 `json:"diffusion_ms"`
	DecodeMS       float64 `json:"decode_ms"`
}

// SampleReport is report.json of one sample.
type SampleReport struct {
	Sample int64  `json:"sample"`
	Seed   int64  `json:"seed"`
	Model  string `json:"model"`
	Image  string `json:"image"`
	// LastImage is the last frame's image of a first-last-frame model.
	LastImage string `json:"last_image,omitempty"`
	// Prompt, NegativePrompt (or PromptEmbeds, NegativePromptEmbeds) and the guidance
	// scales are a text-to-video model's inputs (Wan).
	Prompt               string  `json:"prompt,omitempty"`
	NegativePrompt       string  `json:"negative_prompt,omitempty"`
	PromptEmbeds         string  `json:"prompt_embeds,omitempty"`
	NegativePromptEmbeds string  `json:"negative_prompt_embeds,omitempty"`
	GuidanceScale        float64 `json:"guidance_scale,omitempty"`
	GuidanceScale2       float64 `json:"guidance_scale_2,omitempty"`
	// Sampler is the scheduler that ran (--scheduler, or the folder's own); FlowShift a
	// flow model's shift. Provenance's Scheduler is the folder's scheduler config.
	Sampler   string  `json:"sampler,omitempty"`
	FlowShift float64 `json:"flow_shift,omitempty"`
	// LoRA and LoRA2 are the LoRAs merged into the denoisers (the second expert's apart).
	LoRA        []lora.Spec `json:"lora,omitempty"`
	LoRA2       []lora.Spec `json:"lora_2,omitempty"`
	Frames      int         `json:"num_frames"`
	Height      int         `json:"height"`
	Width       int         `json:"width"`
	Steps       int         `json:"steps"`
	MinGuidance float64     `json:"min_guidance"`
	MaxGuidance float64     `json:"max_guidance"`
	FPS         int         `json:"fps"`
	MotionID    int         `json:"motion_bucket_id"`
	NoiseAug    float64     `json:"noise_aug_strength"`
	DecodeChunk int         `json:"decode_chunk_size"`
	DecodeRanks int         `json:"decode_ranks"`
	VAETile     int         `json:"vae_tile,omitempty"`
	Window      int         `json:"window,omitempty"`
	Overlap     int         `json:"overlap"`
	Blend       string      `json:"blend,omitempty"`
	NProc       int         `json:"nproc"`
	// PP, CFG, CP and DP are the mesh the run used (their product is NProc).
	PP      int              `json:"pp"`
	CFG     int              `json:"cfg"`
	CP      int              `json:"cp"`
	DP      int              `json:"dp"`
	Stages  []StageWeights   `json:"stages"`
	Timings Timings          `json:"timings_ms"`
	Pixels  video.FrameStats `json:"pixel_stats"`
	Files   []string         `json:"files"`
	MP4     string           `json:"mp4"`
	// Cache is the step cache of a cached run (--cache): the rule, which calls computed.
	Cache *pipeline.CacheSummary `json:"cache,omitempty"`
	// NumSamples and MicroBatch are the run's (a sample's noise is keyed by (seed,
	// sample), so the same job reproduces each sample).
	NumSamples int `json:"num_samples,omitempty"`
	MicroBatch int `json:"micro_batch,omitempty"`
	Provenance
}
