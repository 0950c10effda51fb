package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// Item is the unit that flows through the pipeline: a micro-batch of consecutive samples
// that stays together from the first step to the last, so its batch composition (and hence
// its bits) never depends on timing.
type Item struct {
	// Group is the micro-batch index; it holds samples [Group*B, Group*B+len(Samples)).
	Group int64
	// Samples are the sample ids, in row order.
	Samples []int64
	// Step is the next step to run (global index).
	Step int
	// Latent is [len(Samples), T, C, H, W].
	Latent *tensor.Dense
	// Cond has one entry per sample. It travels with the item the first time the item
	// reaches a stage (it is computed once, on stage 0).
	Cond []model.Conditioning
	// Guidance holds per-frame classifier-free guidance weights [T] when the run is guided,
	// nil otherwise (the same weights for every row).
	Guidance []float32
	// SchedState is the scheduler's memory of this item between steps (a multistep
	// solver's previous model outputs); empty for a one-step scheduler such as Euler. It
	// travels with the latent, so a stage cut never changes the solver's bits.
	SchedState sched.State
	// Windows, when set, steps an item longer than Windows.Size latent frames as
	// overlapping temporal windows (a long video); it travels with the item, so every
	// stage and server worker steps the item the same way.
	Windows *Windows
	// Cache, when set, is the item's step cache (docs/caching.md): its rule, the
	// denoiser's states per sample, expert, CFG branch and window, and each sample's record
	// of which calls computed. It travels with the latent (the states unless the rule
	// drops them at stage boundaries), so a stage cut never changes a cached run's bits.
	Cache *ItemCache

	// firstFrame is the first frame, in the whole sample, of a temporal window's item
	// (stepWindows); the model sees it as model.Input.FirstFrame.
	firstFrame int
}

// Groups returns the sample ids of every micro-batch for n samples of batch size b.
func Groups(n, b int) [][]int64 {
	if b < 1 {
		b = 1
	}
	var out [][]int64
	for start := 0; start < n; start += b {
		end := min(start+b, n)
		ids := make([]int64, 0, end-start)
		for s := start; s < end; s++ {
			ids = append(ids, int64(s))
		}
		out = append(out, ids)
	}
	return out
}

// Wire names of the tensors of a hand-off message.
const (
	wireLatent     = "latent"
	wireSamples    = "samples"
	wireGuidance   = "guidance"
	wireCondPref   = "cond/"            // cond/<row>/<name>
	wireSchedPref  = "sched_state/"     // sched_state/<name>: SchedState.Latent, shaped as the latent
	wireSharedPref = "sched_shared/"    // sched_shared/<name>: SchedState.Shared, 1-D
	wireRowPref    = "sched_rows/"      // sched_rows/<name>: SchedState.PerRow, [rows, k]
	wireWindows    = "windows"          // [Size, Overlap, blend code]
	wireWinGuide   = "windows_guidance" // Windows.Guidance
)

// blendCodes are the wire codes of Windows.Blend.
var blendCodes = []string{"linear", "cosine"}

// ToMessage encodes an item for the transport. Integers (sample ids, windows, a cache
// rule's) travel exactly (intsTensor), floats as they are.
func (it *Item) ToMessage() comm.Message {
	ids := intsTensor(it.Samples...)
	m := comm.Message{Sample: it.Group, Step: int32(it.Step)}
	m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireLatent, Tensor: it.Latent}, comm.NamedTensor{Name: wireSamples, Tensor: ids})
	if it.Guidance != nil {
		m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireGuidance, Tensor: &tensor.Dense{Shape: []int{len(it.Guidance)}, Data: it.Guidance}})
	}
	if w := it.Windows; w != nil {
		code := slices.Index(blendCodes, w.Blend)
		m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireWindows, Tensor: intsTensor(ints64(w.Size, w.Overlap, code)...)})
		if w.Guidance != nil {
			m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireWinGuide, Tensor: &tensor.Dense{Shape: []int{len(w.Guidance)}, Data: w.Guidance}})
		}
	}
	for _, name := range sortedKeys(it.SchedState.Latent) {
		m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireSchedPref + name, Tensor: &tensor.Dense{Shape: it.Latent.Shape, Data: it.SchedState.Latent[name]}})
	}
	for _, name := range sortedKeys(it.SchedState.Shared) {
		v := it.SchedState.Shared[name]
		m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireSharedPref + name, Tensor: &tensor.Dense{Shape: []int{len(v)}, Data: v}})
	}
	for _, name := range sortedKeys(it.SchedState.PerRow) {
		v, rows := it.SchedState.PerRow[name], max(len(it.Samples), 1)
		m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireRowPref + name, Tensor: &tensor.Dense{Shape: []int{rows, len(v) / rows}, Data: v}})
	}
	if it.Cache != nil {
		it.Cache.appendWire(&m)
	}
	for row, c := range it.Cond {
		for _, name := range sortedKeys(c) {
			m.Tensors = append(m.Tensors, comm.NamedTensor{Name: fmt.Sprintf("%s%d/%s", wireCondPref, row, name), Tensor: c[name]})
		}
	}
	return m
}

// ItemFromMessage decodes a hand-off message.
func ItemFromMessage(m comm.Message) (*Item, error) {
	it := &Item{Group: m.Sample, Step: int(m.Step)}
	idt := m.Tensor(wireSamples)
	it.Latent = m.Tensor(wireLatent)
	if it.Latent == nil || idt == nil {
		return nil, fmt.Errorf("pipeline: hand-off for group %d step %d lacks the latent or sample ids", m.Sample, m.Step)
	}
	ids, err := intsOf(idt)
	if err != nil {
		return nil, fmt.Errorf("pipeline: hand-off for group %d: sample ids: %w", m.Sample, err)
	}
	if len(it.Latent.Shape) != 5 || it.Latent.Shape[0] != len(ids) {
		return nil, fmt.Errorf("pipeline: hand-off for group %d: latent %v does not match %d samples", m.Sample, it.Latent.Shape, len(ids))
	}
	it.Samples = ids
	if g := m.Tensor(wireGuidance); g != nil {
		it.Guidance = g.Data
	}
	if wt := m.Tensor(wireWindows); wt != nil {
		w, err := intsOf(wt)
		if err != nil || len(w) != 3 || !inRange(w[2:], 0, int64(len(blendCodes)-1)) || !inRange(w[:1], 1, 1<<20) || !inRange(w[1:2], 0, 1<<20) {
			return nil, fmt.Errorf("pipeline: hand-off for group %d: windows %v", m.Sample, wt.Data)
		}
		it.Windows = &Windows{Size: int(w[0]), Overlap: int(w[1]), Blend: blendCodes[w[2]]}
		if g := m.Tensor(wireWinGuide); g != nil {
			it.Windows.Guidance = g.Data
		}
		if err := it.Windows.Validate(it.Latent.Shape[1]); err != nil {
			return nil, fmt.Errorf("pipeline: hand-off for group %d: %w", m.Sample, err)
		}
	}
	cache, err := cacheFromMessage(m, len(it.Samples))
	if err != nil {
		return nil, fmt.Errorf("pipeline: hand-off for group %d: %w", m.Sample, err)
	}
	it.Cache = cache
	for _, nt := range m.Tensors {
		if name, ok := strings.CutPrefix(nt.Name, wireSchedPref); ok {
			if nt.Tensor.Len() != it.Latent.Len() {
				return nil, fmt.Errorf("pipeline: hand-off for group %d: scheduler state %q holds %d values for latent %v", m.Sample, name, nt.Tensor.Len(), it.Latent.Shape)
			}
			if it.SchedState.Latent == nil {
				it.SchedState.Latent = map[string][]float32{}
			}
			it.SchedState.Latent[name] = nt.Tensor.Data
			continue
		}
		if name, ok := strings.CutPrefix(nt.Name, wireSharedPref); ok {
			if it.SchedState.Shared == nil {
				it.SchedState.Shared = map[string][]float32{}
			}
			it.SchedState.Shared[name] = nt.Tensor.Data
			continue
		}
		if name, ok := strings.CutPrefix(nt.Name, wireRowPref); ok {
			if len(nt.Tensor.Shape) != 2 || nt.Tensor.Shape[0] != len(it.Samples) || nt.Tensor.Len() != len(nt.Tensor.Data) {
				return nil, fmt.Errorf("pipeline: hand-off for group %d: scheduler row state %q is %v for %d samples", m.Sample, name, nt.Tensor.Shape, len(it.Samples))
			}
			if it.SchedState.PerRow == nil {
				it.SchedState.PerRow = map[string][]float32{}
			}
			it.SchedState.PerRow[name] = nt.Tensor.Data
			continue
		}
		var row int
		var name string
		if n, _ := fmt.Sscanf(nt.Name, wireCondPref+"%d/%s", &row, &name); n != 2 {
			continue
		}
		if row < 0 || row >= len(it.Samples) {
			return nil, fmt.Errorf("pipeline: hand-off for group %d: conditioning row %d out of range", m.Sample, row)
		}
		if it.Cond == nil {
			it.Cond = make([]model.Conditioning, len(it.Samples))
		}
		if it.Cond[row] == nil {
			it.Cond[row] = model.Conditioning{}
		}
		it.Cond[row][name] = nt.Tensor
	}
	return it, nil
}
