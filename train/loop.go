package train

import (
	"bytes"
	stdcontext "context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"sort"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/tensor"
)

// ErrDiverged is returned when a rank's training state differs from rank 0's.
var ErrDiverged = errors.New("train: ranks diverged")

// Checkpoint metadata keys of the data-parallel loop.
const (
	metaStateHash  = "state_fnv64" // stateHash of the saved variables
	metaWorld      = "world_size"  // ranks that agreed on the state when it was written
	metaDataCursor = "data_cursor" // the step whose batch comes next
	metaRNG        = "rng"         // how every random draw is keyed (no other RNG state exists)
	metaBatch      = "batch"       // examples per step
	metaMicroBatch = "micro_batch" // examples per gradient computation
	rngKeying      = "pcg(seed*1000003+phase, step), draws in example order; no other state"
)

// RankTimes is where one rank's time went during a run (seconds, summed over its steps).
type RankTimes struct {
	Rank int `json:"rank"`
	// Compute is the microbatch gradients, Data (a part of Compute) building their inputs.
	Compute float64 `json:"compute_s"`
	Data    float64 `json:"data_s"`
	// Wait is the time spent waiting for the slowest rank before the exchange, AllReduce
	// the exchange of the gradients and their sum.
	Wait      float64 `json:"wait_s"`
	AllReduce float64 `json:"allreduce_s"`
	// Apply is the optimizer and the EMA; Other the state checks, checkpoints and log.
	Apply float64 `json:"apply_s"`
	Other float64 `json:"other_s"`
	// CPU is the process's CPU time (user + system) over the steps.
	CPU float64 `json:"cpu_s"`
}

// microBatch is the examples per gradient computation.
func (o Options) microBatch() int {
	if o.MicroBatch > 0 {
		return o.MicroBatch
	}
	return 1
}

// stepVector is one rank's contribution to a step's exchange: its nodes of the summation
// tree, each a gradient followed by the loss and metrics, then one stop flag.
func stepVector(own [][]float32, stop bool) *tensor.Dense {
	n := 1
	for _, v := range own {
		n += len(v)
	}
	out := make([]float32, 0, n)
	for _, v := range own {
		out = append(out, v...)
	}
	flag := float32(0)
	if stop {
		flag = 1
	}
	return &tensor.Dense{Shape: []int{n}, Data: append(out, flag)}
}

// gatherTimes collects every rank's times (in rank order) on every rank.
func gatherTimes(ctx stdcontext.Context, peers Peers, t RankTimes) ([]RankTimes, error) {
	v := []float32{float32(t.Compute), float32(t.Data), float32(t.Wait), float32(t.AllReduce), float32(t.Apply), float32(t.Other), float32(t.CPU)}
	parts, err := peers.AllGather(ctx, &tensor.Dense{Shape: []int{len(v)}, Data: v})
	if err != nil {
		return nil, fmt.Errorf("train: gather the ranks' times: %w", err)
	}
	out := make([]RankTimes, len(parts))
	for r, p := range parts {
		if len(p.Data) != len(v) {
			return nil, fmt.Errorf("train: rank %d sent %d times, want %d", r, len(p.Data), len(v))
		}
		d := p.Data
		out[r] = RankTimes{Rank: r, Compute: float64(d[0]), Data: float64(d[1]), Wait: float64(d[2]), AllReduce: float64(d[3]),
			Apply: float64(d[4]), Other: float64(d[5]), CPU: float64(d[6])}
	}
	return out, nil
}

// openLossLog opens the run folder's loss log for appending after dropping the lines of
// o.Phase past step from (a run killed after its last checkpoint logged steps that the
// resumed run computes again), so the log holds every step once.
func openLossLog(o Options, from int) (*os.File, error) {
	path := LossLogPath(o.Dir)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("train: loss log: %w", err)
	}
	var kept bytes.Buffer
	dropped := false
	for _, ln := range bytes.SplitAfter(old, []byte("\n")) {
		if len(bytes.TrimSpace(ln)) == 0 {
			continue
		}
		var l LogLine
		if json.Unmarshal(ln, &l) == nil && l.Phase == o.Phase && l.Step > from {
			dropped = true
			continue
		}
		if !bytes.HasSuffix(ln, []byte("\n")) {
			dropped = true // a torn last line
			continue
		}
		kept.Write(ln)
	}
	if dropped {
		if err := atomicfile.Write(path, atomicfile.Options{}, func(w io.Writer) error {
			_, err := w.Write(kept.Bytes())
			return err
		}); err != nil {
			return nil, fmt.Errorf("train: loss log: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("train: loss log: %w", err)
	}
	return f, nil
}

// stateHash is the FNV-1a hash of every variable of ctx but the learning rate (which each
// step sets from the schedule): names, shapes and bits, in name order.
func stateHash(ctx *context.Context) (uint64, error) {
	type entry struct {
		name string
		v    *context.Variable
	}
	var vars []entry
	for v := range ctx.IterVariables() {
		if v.Name() == optimizers.ParamLearningRate {
			continue
		}
		vars = append(vars, entry{v.Scope() + keySep + v.Name(), v})
	}
	sort.Slice(vars, func(i, j int) bool { return vars[i].name < vars[j].name })
	h := fnv.New64a()
	var b [8]byte
	for _, e := range vars {
		h.Write([]byte(e.name))
		val, err := e.v.Value()
		if err != nil {
			return 0, fmt.Errorf("train: hash %s: %w", e.name, err)
		}
		for _, d := range val.Shape().Dimensions {
			binary.LittleEndian.PutUint64(b[:], uint64(d))
			h.Write(b[:])
		}
		switch val.DType() {
		case dtypes.Float32:
			data, err := tensors.CopyFlatData[float32](val)
			if err != nil {
				return 0, err
			}
			buf := make([]byte, 4*len(data))
			for i, f := range data {
				binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(f))
			}
			h.Write(buf)
		case dtypes.Int64:
			data, err := tensors.CopyFlatData[int64](val)
			if err != nil {
				return 0, err
			}
			for _, x := range data {
				binary.LittleEndian.PutUint64(b[:], uint64(x))
				h.Write(b[:])
			}
		default:
			return 0, fmt.Errorf("train: hash %s: dtype %s", e.name, val.DType())
		}
	}
	return h.Sum64(), nil
}

// hashTensor carries a 64-bit hash as four 16-bit integers, each exact in a float32.
func hashTensor(h uint64) *tensor.Dense {
	d := make([]float32, 4)
	for i := range d {
		d[i] = float32(uint16(h >> (16 * i)))
	}
	return &tensor.Dense{Shape: []int{4}, Data: d}
}

func tensorHash(t *tensor.Dense) uint64 {
	var h uint64
	for i, v := range t.Data {
		h |= uint64(uint16(v)) << (16 * i)
	}
	return h
}

// progress draws the bar (terminal) or a log line every each steps: loss, learning rate,
// step rate (and clips per second), elapsed time and the time left at the current rate.
func progress(o Options, each int, l LogLine, stepS float64) {
	if o.Progress == nil {
		return
	}
	eta := time.Duration(float64(o.Steps-l.Step) * stepS * float64(time.Second)).Round(time.Second)
	rate := 0.0
	if stepS > 0 {
		rate = 1 / stepS
	}
	if o.Terminal {
		const width = 30
		done := width * l.Step / max(o.Steps, 1)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = '.'
			if i < done {
				bar[i] = '#'
			}
		}
		fmt.Fprintf(o.Progress, "\r%s [%s] %d/%d loss %.4f %.2f steps/s eta %s   ", o.Phase, bar, l.Step, o.Steps, l.Loss, rate, eta)
		return
	}
	if l.Step%each == 0 || l.Step == o.Steps || l.HeldOut != 0 {
		metric := ""
		if o.Phase == PhaseVAE {
			metric = fmt.Sprintf(" mse %.5f", l.MSE)
		}
		if l.HeldOut != 0 {
			metric += fmt.Sprintf(" held-out %.5f", l.HeldOut)
		}
		fmt.Fprintf(o.Progress, "train %s step %d/%d loss %.5f%s lr %.3g %.2f steps/s %.1f clips/s elapsed %.0fs eta %s\n",
			o.Phase, l.Step, o.Steps, l.Loss, metric, l.LR, rate, rate*float64(o.Batch), l.ElapsedS, eta)
	}
}
