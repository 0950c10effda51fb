package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/tensor"
)

// GroupResult is what one `vdpp worker calibrate` job of World processes measures (rank
// 0's view).
type GroupResult struct {
	World int   `json:"world"`
	Bytes int64 `json:"bytes"`
	// AllGathers has one entry per group size g >= 2 dividing World: the world split into
	// World/g groups of g consecutive ranks, all gathering at once (as the cfg or cp groups
	// of a mesh do), and MS the median time one iteration of (pause, all-gather) takes
	// beyond the pause alone: what a step loses to its all-gather.
	AllGathers []GroupCost `json:"all_gathers"`
	// HandOffSmallMS and HandOffMS are one-way times (half a round trip after a pause) of a
	// 4-byte and a Bytes-sized message from rank 0 to rank 1, while the other ranks do the
	// same in pairs (World >= 2).
	HandOffSmallMS float64 `json:"hand_off_small_ms,omitempty"`
	HandOffMS      float64 `json:"hand_off_ms,omitempty"`
}

// GroupWorker runs on every rank of tr's world: all-gathers of bytes per member over
// groups of every size dividing the world, then hand-offs between pairs of ranks. Every
// rank must call it with the same arguments; rank 0's result is the one to keep.
func (c *Calibrator) GroupWorker(ctx context.Context, tr comm.Transport, bytes int64) (GroupResult, error) {
	n, me := tr.Size(), tr.Rank()
	res := GroupResult{World: n, Bytes: bytes}
	x := tensor.New(int(max(1, bytes/4)))
	reps := max(3, c.repeats())
	idle := make([]float64, reps)
	for i := range idle {
		t0 := c.now()
		c.pause()
		idle[i] = msSince(c, t0)
	}
	for g := 2; g <= n; g++ {
		if n%g != 0 {
			continue
		}
		lo := me / g * g
		grp, err := comm.NewNamedGroup(tr, fmt.Sprintf("calibrate-%d", g), rangeInts(lo, lo+g))
		if err != nil {
			return GroupResult{}, fmt.Errorf("plan: calibrate group of %d: %w", g, err)
		}
		busy := make([]float64, reps+3)
		for i := range busy {
			t0 := c.now()
			c.pause()
			if _, err := comm.AllGather(ctx, grp, x); err != nil {
				return GroupResult{}, fmt.Errorf("plan: calibrate all-gather over %d: %w", g, err)
			}
			busy[i] = msSince(c, t0)
		}
		res.AllGathers = append(res.AllGathers, GroupCost{Size: g, Bytes: bytes, MS: max(0, mean(busy[3:])-mean(idle))})
	}
	peer := me ^ 1
	if n >= 2 && peer < n {
		for _, size := range []int64{4, max(4, bytes)} {
			ms, err := c.pingPong(ctx, tr, peer, me%2 == 0, size)
			if err != nil {
				return GroupResult{}, err
			}
			if size == 4 {
				res.HandOffSmallMS = ms
			} else {
				res.HandOffMS = ms
			}
		}
	}
	// Nobody leaves (closing its links) before every message has arrived.
	if n >= 2 {
		all, err := comm.NewNamedGroup(tr, "calibrate-end", rangeInts(0, n))
		if err != nil {
			return GroupResult{}, fmt.Errorf("plan: calibrate: %w", err)
		}
		if err := comm.Barrier(ctx, all); err != nil {
			return GroupResult{}, fmt.Errorf("plan: calibrate: %w", err)
		}
	}
	return res, nil
}

// pingPong: the leader sends size bytes to peer after a pause and waits for the echo
// (median over repeats, after one warm-up) and returns half the round trip; the other
// side echoes and returns 0.
func (c *Calibrator) pingPong(ctx context.Context, tr comm.Transport, peer int, leader bool, size int64) (float64, error) {
	m := comm.Message{Tensors: []comm.NamedTensor{{Name: "latent", Tensor: tensor.New(int(size / 4))}}}
	if !leader {
		for range c.repeats() + 1 {
			got, err := tr.Recv(ctx, peer)
			if err == nil {
				err = tr.Send(ctx, peer, got)
			}
			if err != nil {
				return 0, fmt.Errorf("plan: calibrate hand-off (%d bytes): %w", size, err)
			}
		}
		return 0, nil
	}
	rtt, err := c.median(c.pause, func() error {
		if err := tr.Send(ctx, peer, m); err != nil {
			return err
		}
		_, err := tr.Recv(ctx, peer)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("plan: calibrate hand-off (%d bytes): %w", size, err)
	}
	return rtt / 2, nil
}

// WriteGroupResult writes r as JSON to path.
func WriteGroupResult(path string, r GroupResult) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("plan: encode calibration result: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}

func rangeInts(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func msSince(c *Calibrator, t0 time.Time) float64 {
	return float64(c.now().Sub(t0).Nanoseconds()) / 1e6
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
