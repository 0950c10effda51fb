package sched

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrBadState is returned (wrapped) when serialised scheduler state cannot be decoded.
var ErrBadState = errors.New("sched: bad scheduler state")

// UniPCState is everything UniPCMultistepScheduler mutates while stepping. Step updates it
// in place; Clone, MarshalBinary / UnmarshalBinary and Tensors / UniPCStateFromTensors copy
// it exactly, so a run resumed from a copy continues with the same bits.
type UniPCState struct {
	// StepIndex is the index of the next step; -1 before the first, which then takes it
	// from its timestep.
	StepIndex int
	// LowerOrderNums counts the warm-up steps taken, up to solver_order.
	LowerOrderNums int
	// ThisOrder is the predictor order of the last step, the corrector order of the next.
	ThisOrder int
	// ModelOutputs holds the last solver_order converted model outputs, oldest first; nil
	// where diffusers holds None.
	ModelOutputs [][]float32
	// HistoryTimesteps holds the timestep of each ModelOutputs entry (NaN for None).
	HistoryTimesteps []float32
	// LastSample is the sample the last predictor started from (nil before the first step).
	LastSample []float32
}

// Clone returns a deep copy of s.
func (s *UniPCState) Clone() *UniPCState {
	c := *s
	c.ModelOutputs = make([][]float32, len(s.ModelOutputs))
	for i, m := range s.ModelOutputs {
		c.ModelOutputs[i] = slices.Clone(m)
	}
	c.HistoryTimesteps = slices.Clone(s.HistoryTimesteps)
	c.LastSample = slices.Clone(s.LastSample)
	return &c
}

// uniPCStateMagic starts every binary UniPC state (version 1).
const uniPCStateMagic = "vdpp.unipc.v1\x00"

// MarshalBinary encodes s: the magic, the three counters and the history length as
// little-endian int64s, the latent length, then per history entry a presence byte, its
// timestep bits and its values, then the last sample the same way.
func (s *UniPCState) MarshalBinary() ([]byte, error) {
	n := 0
	for _, m := range append(slices.Clone(s.ModelOutputs), s.LastSample) {
		if m != nil {
			if n != 0 && len(m) != n {
				return nil, fmt.Errorf("%w: tensors of %d and %d values", ErrBadState, n, len(m))
			}
			n = len(m)
		}
	}
	if len(s.HistoryTimesteps) != len(s.ModelOutputs) {
		return nil, fmt.Errorf("%w: %d history timesteps for %d entries", ErrBadState, len(s.HistoryTimesteps), len(s.ModelOutputs))
	}
	b := []byte(uniPCStateMagic)
	for _, v := range []int{s.StepIndex, s.LowerOrderNums, s.ThisOrder, len(s.ModelOutputs), n} {
		b = binary.LittleEndian.AppendUint64(b, uint64(int64(v)))
	}
	put := func(m []float32) {
		if m == nil {
			b = append(b, 0)
			return
		}
		b = append(b, 1)
		for _, v := range m {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	for i, m := range s.ModelOutputs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(s.HistoryTimesteps[i]))
		put(m)
	}
	put(s.LastSample)
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, replacing s.
func (s *UniPCState) UnmarshalBinary(data []byte) error {
	if len(data) < len(uniPCStateMagic) || string(data[:len(uniPCStateMagic)]) != uniPCStateMagic {
		return fmt.Errorf("%w: not a UniPC state (magic)", ErrBadState)
	}
	r := data[len(uniPCStateMagic):]
	var head [5]int64
	for i := range head {
		if len(r) < 8 {
			return fmt.Errorf("%w: truncated header", ErrBadState)
		}
		head[i] = int64(binary.LittleEndian.Uint64(r))
		r = r[8:]
	}
	hist, n := head[3], head[4]
	for _, v := range head[:3] {
		if v < -1 || v > math.MaxInt32 {
			return fmt.Errorf("%w: counter %d out of range", ErrBadState, v)
		}
	}
	if hist < 1 || hist > maxSolverOrder || n < 0 || n > int64(len(r))/4 {
		return fmt.Errorf("%w: history length %d or latent length %d out of range", ErrBadState, hist, n)
	}
	get := func() ([]float32, error) {
		if len(r) < 1 {
			return nil, fmt.Errorf("%w: truncated", ErrBadState)
		}
		flag := r[0]
		r = r[1:]
		switch flag {
		case 0:
			return nil, nil
		case 1:
		default:
			return nil, fmt.Errorf("%w: presence byte %d", ErrBadState, flag)
		}
		if int64(len(r)) < 4*n {
			return nil, fmt.Errorf("%w: truncated tensor", ErrBadState)
		}
		m := make([]float32, n)
		for i := range m {
			m[i] = math.Float32frombits(binary.LittleEndian.Uint32(r[4*i:]))
		}
		r = r[4*n:]
		return m, nil
	}
	out := UniPCState{StepIndex: int(head[0]), LowerOrderNums: int(head[1]), ThisOrder: int(head[2]),
		ModelOutputs: make([][]float32, hist), HistoryTimesteps: make([]float32, hist)}
	for i := range out.ModelOutputs {
		if len(r) < 4 {
			return fmt.Errorf("%w: truncated timestep", ErrBadState)
		}
		out.HistoryTimesteps[i] = math.Float32frombits(binary.LittleEndian.Uint32(r))
		r = r[4:]
		m, err := get()
		if err != nil {
			return err
		}
		out.ModelOutputs[i] = m
	}
	m, err := get()
	if err != nil {
		return err
	}
	out.LastSample = m
	if len(r) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadState, len(r))
	}
	if n != 0 && out.LastSample == nil && !slices.ContainsFunc(out.ModelOutputs, func(m []float32) bool { return m != nil }) {
		return fmt.Errorf("%w: latent length %d without tensors", ErrBadState, n)
	}
	*s = out
	return nil
}

// Tensor names of Tensors / UniPCStateFromTensors.
const (
	uniPCTensorCounters  = "unipc/counters"   // [step_index, lower_order_nums, this_order]
	uniPCTensorTimesteps = "unipc/timesteps"  // [solver_order], NaN for None
	uniPCTensorOutput    = "unipc/model_out/" // + history position
	uniPCTensorLast      = "unipc/last_sample"
)

// Tensors returns s as named float32 vectors, for transports that carry tensors: the
// counters (exact in float32), the history timesteps, and one vector per present history
// entry and for the last sample. The vectors alias s.
func (s *UniPCState) Tensors() map[string][]float32 {
	out := map[string][]float32{
		uniPCTensorCounters:  {float32(s.StepIndex), float32(s.LowerOrderNums), float32(s.ThisOrder)},
		uniPCTensorTimesteps: s.HistoryTimesteps,
	}
	for i, m := range s.ModelOutputs {
		if m != nil {
			out[uniPCTensorOutput+strconv.Itoa(i)] = m
		}
	}
	if s.LastSample != nil {
		out[uniPCTensorLast] = s.LastSample
	}
	return out
}

// UniPCStateFromTensors rebuilds a state from Tensors' output (the vectors are aliased,
// not copied). Names it does not know are an error.
func UniPCStateFromTensors(m map[string][]float32) (*UniPCState, error) {
	c, ts := m[uniPCTensorCounters], m[uniPCTensorTimesteps]
	if len(c) != 3 || len(ts) < 1 || len(ts) > maxSolverOrder {
		return nil, fmt.Errorf("%w: counters %d values, timesteps %d values", ErrBadState, len(c), len(ts))
	}
	s := &UniPCState{HistoryTimesteps: ts, ModelOutputs: make([][]float32, len(ts)), LastSample: m[uniPCTensorLast]}
	for i, p := range []*int{&s.StepIndex, &s.LowerOrderNums, &s.ThisOrder} {
		v := c[i]
		if v != float32(math.Trunc(float64(v))) || v < -1 || v > 1<<24 {
			return nil, fmt.Errorf("%w: counter %v", ErrBadState, v)
		}
		*p = int(v)
	}
	for name, v := range m {
		switch name {
		case uniPCTensorCounters, uniPCTensorTimesteps, uniPCTensorLast:
			continue
		}
		pos, ok := strings.CutPrefix(name, uniPCTensorOutput)
		i, err := strconv.Atoi(pos)
		if !ok || err != nil || i < 0 || i >= len(ts) {
			return nil, fmt.Errorf("%w: unexpected tensor %q", ErrBadState, name)
		}
		s.ModelOutputs[i] = v
	}
	return s, nil
}
