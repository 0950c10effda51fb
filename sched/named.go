package sched

import "fmt"

// SamplerInfo names a sampler a model offers (the value of --scheduler) and says what it is.
type SamplerInfo struct {
	Name string `json:"name"`
	Help string `json:"help"`
}

// Sampler names. A family declares which it offers; these are the implementations.
const (
	// Models on a Karras (EDM) schedule, such as Stable Video Diffusion.
	NameEuler          = "euler"
	NameEulerAncestral = "euler-a"
	NameDPM2MKarras    = "dpm++2m-karras"
	// Flow-matching models, such as Wan (NameEuler is flow-match Euler there).
	NameUniPC = "unipc"
	NameDPM2M = "dpm++2m"
	NameLCM   = "lcm"
)

// KarrasSamplers are the samplers NewKarrasNamed builds, the folder's Euler first.
var KarrasSamplers = []SamplerInfo{
	{NameEuler, "Euler on the folder's Karras schedule (EulerDiscreteScheduler, the default)"},
	{NameEulerAncestral, "Euler ancestral: each step adds fresh noise, keyed by seed, sample and step (EulerAncestralDiscreteScheduler's step)"},
	{NameDPM2MKarras, "DPM++ 2M on Karras sigmas (EDMDPMSolverMultistepScheduler, sigma_data 1)"},
}

// FlowSamplers are the samplers a flow-matching model offers (a family puts its folder's
// own first).
var FlowSamplers = []SamplerInfo{
	{NameUniPC, "UniPC multistep (UniPCMultistepScheduler with flow sigmas; the folder's own solver order and type)"},
	{NameEuler, "flow-match Euler (FlowMatchEulerDiscreteScheduler with shift = the flow shift)"},
	{NameDPM2M, "DPM++ 2M on flow sigmas (DPMSolverMultistepScheduler, flow_prediction)"},
	{NameLCM, "LCM for the step-distilled LoRAs: x0 re-noised to the next level at every step (FlowMatchLCMScheduler on lightx2v's schedule)"},
}

// NewKarrasNamed returns the sampler name ("" for Euler) of KarrasSamplers on the schedule of
// cfg, an EulerDiscreteScheduler config with Karras sigmas, for steps steps.
func NewKarrasNamed(name string, cfg Config, steps int) (Scheduler, error) {
	switch name {
	case "", NameEuler:
		return New(cfg, steps)
	case NameEulerAncestral:
		return NewEulerAncestral(cfg, steps)
	case NameDPM2MKarras:
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return NewEDMDPM(SVDDPMConfig(cfg), steps)
	}
	return nil, fmt.Errorf("sched: no sampler %q on a Karras schedule (%s, %s or %s)", name, NameEuler, NameEulerAncestral, NameDPM2MKarras)
}
