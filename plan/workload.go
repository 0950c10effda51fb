package plan

import (
	"errors"
	"fmt"
)

// ErrBadInput: a workload, mesh, cost set or calibration is malformed.
var ErrBadInput = errors.New("plan: bad input")

// Workload is what is to be generated: Samples samples of Steps denoising steps each, on
// latents [Frames, Channels, Height, Width] (float32), classifier-free guided or not, with
// MicroBatch samples per denoiser call (0 means 1). Warmup is the number of first
// completions a benchmark leaves out of its throughput window (bench's --warmup-samples), so
// the predicted throughput is the quantity `vdpp bench` reports.
type Workload struct {
	Steps      int  `json:"steps"`
	Samples    int  `json:"samples"`
	Frames     int  `json:"frames"`
	Height     int  `json:"height"`
	Width      int  `json:"width"`
	Channels   int  `json:"channels"`
	Guided     bool `json:"guided"`
	MicroBatch int  `json:"micro_batch"`
	Warmup     int  `json:"warmup_samples"`
	// DecodeRanks is how many stages of a pipeline share each sample's decode (generate and
	// bench --decode-ranks): 0 or 1 the last stage alone, N the last min(N, pp) stages.
	DecodeRanks int `json:"decode_ranks,omitempty"`
}

// Validate checks that every size is positive.
func (w Workload) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"steps", w.Steps}, {"samples", w.Samples}, {"frames", w.Frames}, {"height", w.Height},
		{"width", w.Width}, {"channels", w.Channels}} {
		if f.v < 1 {
			return fmt.Errorf("%w: workload %s = %d, need >= 1", ErrBadInput, f.name, f.v)
		}
	}
	if w.MicroBatch < 0 {
		return fmt.Errorf("%w: workload micro_batch = %d", ErrBadInput, w.MicroBatch)
	}
	if w.DecodeRanks < 0 {
		return fmt.Errorf("%w: workload decode_ranks = %d", ErrBadInput, w.DecodeRanks)
	}
	if w.Warmup < 0 {
		return fmt.Errorf("%w: workload warmup_samples = %d", ErrBadInput, w.Warmup)
	}
	return nil
}

// String is the workload in one line, as `vdpp plan` and `vdpp generate --plan auto` print
// it: "1 samples x 25 steps, latent [4,4,8,8], guided true, micro-batch 1, 0 warm-up".
func (w Workload) String() string {
	return fmt.Sprintf("%d samples x %d steps, latent [%d,%d,%d,%d], guided %v, micro-batch %d, %d warm-up",
		w.Samples, w.Steps, w.Frames, w.Channels, w.Height, w.Width, w.Guided, w.Batch(), w.Warmup)
}

// Batch is the micro-batch size (at least 1).
func (w Workload) Batch() int { return max(1, w.MicroBatch) }

// Items is the number of micro-batches ceil(Samples / Batch): the units that flow through
// a pipeline and are spread over data-parallel replicas.
func (w Workload) Items() int { return ceilDiv(w.Samples, w.Batch()) }

// RowsPerSample is 2 for a guided run (unconditional and conditional rows), else 1.
func (w Workload) RowsPerSample() int {
	if w.Guided {
		return 2
	}
	return 1
}

// FrameBytes is the size of one frame of one sample's latent: Channels*Height*Width float32.
func (w Workload) FrameBytes() int64 { return 4 * int64(w.Channels) * int64(w.Height) * int64(w.Width) }

// LatentBytes is the size of one sample's latent.
func (w Workload) LatentBytes() int64 { return int64(w.Frames) * w.FrameBytes() }

// Mesh is a parallel layout: PP pipeline stages over the steps, CFG ranks splitting the
// guidance halves (1 or 2), CP ranks splitting the frames, DP replicas splitting the
// samples. It uses PP*CFG*CP*DP devices.
type Mesh struct {
	PP  int `json:"pp"`
	CFG int `json:"cfg"`
	CP  int `json:"cp"`
	DP  int `json:"dp"`
}

// World is the number of devices (processes) the mesh uses.
func (m Mesh) World() int { return m.PP * m.CFG * m.CP * m.DP }

// String formats the mesh as "pp=7 cfg=1 cp=1 dp=1".
func (m Mesh) String() string {
	return fmt.Sprintf("pp=%d cfg=%d cp=%d dp=%d", m.PP, m.CFG, m.CP, m.DP)
}

// Check reports why the mesh cannot run w: a degree below 1, cfg other than 1 or 2, cfg 2
// on an unguided run, more stages than steps, more cp ranks than frames.
func (m Mesh) Check(w Workload) error {
	switch {
	case m.PP < 1 || m.CFG < 1 || m.CP < 1 || m.DP < 1:
		return fmt.Errorf("%w: %v: every degree must be >= 1", ErrBadInput, m)
	case m.CFG > 2:
		return fmt.Errorf("%w: %v: cfg must be 1 or 2", ErrBadInput, m)
	case m.CFG == 2 && !w.Guided:
		return fmt.Errorf("%w: %v: cfg 2 needs a guided run", ErrBadInput, m)
	case m.PP > w.Steps:
		return fmt.Errorf("%w: %v: %d stages for %d steps", ErrBadInput, m, m.PP, w.Steps)
	case m.CP > w.Frames:
		return fmt.Errorf("%w: %v: %d cp ranks for %d frames", ErrBadInput, m, m.CP, w.Frames)
	}
	return nil
}

// Enumerate lists every mesh with PP*CFG*CP*DP = devices that can run w (see Mesh.Check),
// ordered by pp, then cfg, then cp (dp follows).
func Enumerate(w Workload, devices int) ([]Mesh, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if devices < 1 {
		return nil, fmt.Errorf("%w: %d devices", ErrBadInput, devices)
	}
	var out []Mesh
	for pp := 1; pp <= devices; pp++ {
		if devices%pp != 0 {
			continue
		}
		for cfg := 1; cfg <= 2; cfg++ {
			if (devices/pp)%cfg != 0 {
				continue
			}
			for cp := 1; cp <= devices/(pp*cfg); cp++ {
				if (devices/(pp*cfg))%cp != 0 {
					continue
				}
				m := Mesh{PP: pp, CFG: cfg, CP: cp, DP: devices / (pp * cfg * cp)}
				if m.Check(w) == nil {
					out = append(out, m)
				}
			}
		}
	}
	return out, nil // never empty: pp=cfg=cp=1, dp=devices always runs
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
