package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Stochastic is implemented by schedulers whose update adds fresh Gaussian noise (Euler
// ancestral, the flow LCM sampler). The noise a row gets at a step is drawn from a stream
// keyed by the row's noise key (the run's seed and the row's sample id, which InitialState
// puts in the item's state, State.PerRow) and by the step, never by the process: every mesh
// (any stage cut, cfg or cp split, batch composition) draws the same noise for a sample.
type Stochastic interface {
	Scheduler
	// DrawsNoise reports whether Update draws noise.
	DrawsNoise() bool
}

// noiseKeyName names the PerRow value holding each row's noise key; noiseKeyLen is its
// length per row: the seed and the sample id, each as four 16-bit pieces (exact in float32).
const (
	noiseKeyName = "noise_key"
	noiseKeyLen  = 8
)

// NoiseKey is what a row's step noise is drawn from: the run's seed and the row's sample id
// (the same pair that keys the sample's initial noise).
type NoiseKey struct {
	Seed   int64
	Sample int64
}

// InitialState returns the state an item of the given samples starts from under sc: for a
// Stochastic scheduler that draws noise, each row's noise key; otherwise the empty State.
func InitialState(sc Scheduler, seed int64, samples []int64) State {
	s, ok := sc.(Stochastic)
	if !ok || !s.DrawsNoise() {
		return State{}
	}
	keys := make([]float32, 0, noiseKeyLen*len(samples))
	for _, sample := range samples {
		for _, v := range []int64{seed, sample} {
			u := uint64(v)
			for range 4 {
				keys = append(keys, float32(u&0xffff))
				u >>= 16
			}
		}
	}
	return State{PerRow: map[string][]float32{noiseKeyName: keys}}
}

// NoiseKeys decodes the rows' noise keys from a state InitialState made (or cut and joined
// by rows). It is an error when the state holds none, or the keys do not divide into rows
// rows.
func NoiseKeys(st State, rows int) ([]NoiseKey, error) {
	v, ok := st.PerRow[noiseKeyName]
	if !ok {
		return nil, fmt.Errorf("%w: no noise keys in the state (InitialState makes them)", ErrBadState)
	}
	if rows < 1 || len(v) != noiseKeyLen*rows {
		return nil, fmt.Errorf("%w: %d noise key values for %d rows", ErrBadState, len(v), rows)
	}
	out := make([]NoiseKey, rows)
	for r := range out {
		var w [2]uint64
		for i := range 2 {
			for j := 3; j >= 0; j-- {
				p := v[r*noiseKeyLen+4*i+j]
				if p < 0 || p > 0xffff || p != float32(math.Trunc(float64(p))) {
					return nil, fmt.Errorf("%w: noise key piece %v", ErrBadState, p)
				}
				w[i] = w[i]<<16 | uint64(p)
			}
		}
		out[r] = NoiseKey{Seed: int64(w[0]), Sample: int64(w[1])}
	}
	return out, nil
}

// stepNoiseTag separates the step-noise streams from the initial-noise stream keyed by the
// bare seed.
const stepNoiseTag = 0x5eed5eed5eed5eed

// splitmix64 is the SplitMix64 finaliser: a bijective mix of 64 bits.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// StepNoise fills dst with the standard Gaussian noise row key draws at step: float32 of
// NormFloat64 from a PCG stream seeded with (a mix of the seed and the step, the sample id),
// one value per element in dst's order.
func StepNoise(dst []float32, key NoiseKey, step int) {
	hi := splitmix64(uint64(key.Seed) ^ splitmix64(uint64(step)^stepNoiseTag))
	r := rand.New(rand.NewPCG(hi, uint64(key.Sample)))
	for i := range dst {
		dst[i] = float32(r.NormFloat64())
	}
}

// rowNoise returns the step noise of every row of an item of len(x) values whose state st
// holds the rows' noise keys, in x's layout.
func rowNoise(st State, n, step int) ([]float32, error) {
	v := st.PerRow[noiseKeyName]
	rows := len(v) / noiseKeyLen
	if rows < 1 || n%rows != 0 {
		return nil, fmt.Errorf("%w: %d noise keys for a latent of %d values", ErrBadState, rows, n)
	}
	keys, err := NoiseKeys(st, rows)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	per := n / rows
	for r, k := range keys {
		StepNoise(out[r*per:(r+1)*per], k, step)
	}
	return out, nil
}
