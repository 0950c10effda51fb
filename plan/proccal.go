package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// LaunchFunc starts nproc local processes running `<this executable> args...` (through
// comm.Launch) and waits for all of them.
type LaunchFunc func(ctx context.Context, nproc int, args []string) error

// ProcessCalibrator measures collectives between real processes: it launches one worker per
// device (`vdpp worker calibrate`, see GroupWorker) that time all-gathers over groups of each
// size and hand-offs between pairs, all processes busy at once as in a mesh. Between separate processes on a busy host a
// collective costs the scheduler wake-ups of every member, far more than a link between two
// goroutines of one process suggests.
type ProcessCalibrator struct {
	// Launch starts the workers (required; tests swap it).
	Launch LaunchFunc
	// Dir receives the workers' result files (a temporary folder when empty).
	Dir string
	// Repeats is the number of timed repetitions per measurement (default 50).
	Repeats int
	// Gap is the idle pause before each timed collective (default 2 ms), standing in for
	// the compute between a step's collectives; StepGap gives a good value.
	Gap time.Duration
}

// ProcessCosts are the costs a ProcessCalibrator measured.
type ProcessCosts struct {
	// HandOff is the link between two processes.
	HandOff      Link          `json:"hand_off"`
	AllGathers   []GroupCost   `json:"all_gathers"`
	Measurements []Measurement `json:"measurements"`
}

// Apply returns c with the measured hand-off and all-gathers injected.
func (pc ProcessCosts) Apply(c Costs) Costs {
	if pc.HandOff != (Link{}) {
		c.HandOff = pc.HandOff
	}
	c.AllGathers = append([]GroupCost(nil), pc.AllGathers...)
	return c
}

// StepGap is the pause to calibrate with: the compute of one step split over every device
// (the shortest step a mesh of them runs, where collectives weigh most), at least 0.5 ms.
func StepGap(w Workload, c StepCost, devices int) time.Duration {
	ms := c.MS(w.Batch()*w.RowsPerSample(), w.Frames) / float64(max(1, devices))
	return max(500*time.Microsecond, time.Duration(ms*float64(time.Millisecond)))
}

// WorkerArgs are the arguments of one `vdpp worker calibrate` job (CalibrateWorker)
// writing its result to out.
func (p *ProcessCalibrator) WorkerArgs(bytes int64, out string) []string {
	o := DefaultCalibrateWorker()
	o.Bytes, o.Repeats, o.Out = bytes, cmpDefault(p.Repeats, 50), out
	if p.Gap != 0 {
		o.Gap = p.Gap
	}
	return o.Args()
}

// Measure launches one job of devices processes that times, with all of them busy as in a
// mesh, all-gathers of bytes per member over groups of every size dividing devices, and
// hand-offs of bytes between pairs of them; it returns their results.
func (p *ProcessCalibrator) Measure(ctx context.Context, devices int, bytes int64) (ProcessCosts, error) {
	if p.Launch == nil {
		return ProcessCosts{}, fmt.Errorf("%w: process calibration without a launcher", ErrBadInput)
	}
	if devices < 2 {
		return ProcessCosts{}, nil
	}
	dir := p.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "vdpp-calibrate-")
		if err != nil {
			return ProcessCosts{}, fmt.Errorf("plan: calibrate processes: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	out := filepath.Join(dir, fmt.Sprintf("world-%d.json", devices))
	if err := p.Launch(ctx, devices, p.WorkerArgs(bytes, out)); err != nil {
		return ProcessCosts{}, fmt.Errorf("plan: calibrate %d processes: %w", devices, err)
	}
	res, err := readGroupResult(out)
	if err != nil {
		return ProcessCosts{}, fmt.Errorf("plan: calibrate %d processes: %w", devices, err)
	}
	return res.Costs(devices)
}

// Costs turns a worker's result into ProcessCosts, checking that it is for a world of
// devices.
func (r GroupResult) Costs(devices int) (ProcessCosts, error) {
	if r.World != devices {
		return ProcessCosts{}, fmt.Errorf("%w: calibration of %d processes is for %d", ErrBadInput, devices, r.World)
	}
	pc := ProcessCosts{AllGathers: append([]GroupCost(nil), r.AllGathers...)}
	for _, g := range r.AllGathers {
		if g.Size < 2 || devices%g.Size != 0 || g.MS < 0 {
			return ProcessCosts{}, fmt.Errorf("%w: calibration of %d processes: all-gather %+v", ErrBadInput, devices, g)
		}
		name := fmt.Sprintf("all-gather/%d", g.Size)
		pc.Measurements = append(pc.Measurements, Measurement{Name: name, Bytes: g.Bytes, MS: g.MS})
	}
	pc.HandOff = FitLink(r.Bytes, r.HandOffSmallMS, r.HandOffMS)
	pc.Measurements = append(pc.Measurements,
		Measurement{Name: "hand-off", Bytes: 4, MS: r.HandOffSmallMS},
		Measurement{Name: "hand-off", Bytes: max(4, r.Bytes), MS: r.HandOffMS})
	return pc, nil
}

// FitLink fits a Link to the one-way times of a 4-byte message (small) and of a bytes-sized
// one (big): latency small and the bandwidth of the difference, or a latency-only link when
// the big message was not slower.
func FitLink(bytes int64, small, big float64) Link {
	if big <= small || bytes <= 4 {
		return Link{LatencyMS: max(small, big)}
	}
	return Link{LatencyMS: small, BytesPerS: float64(bytes-4) / (big - small) * 1e3}
}

func readGroupResult(path string) (GroupResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return GroupResult{}, err
	}
	var r GroupResult
	if err := json.Unmarshal(b, &r); err != nil {
		return GroupResult{}, fmt.Errorf("%w: %s: %w", ErrBadInput, path, err)
	}
	if r.HandOffMS < 0 || r.HandOffSmallMS < 0 {
		return GroupResult{}, fmt.Errorf("%w: %s: negative time", ErrBadInput, path)
	}
	return r, nil
}
