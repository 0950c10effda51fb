package pipeline

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/tensor"
)

// Wire names of an item's cache in a hand-off.
const (
	wireCacheRule  = "cache_rule"   // exact integers (intsTensor): mode, threshold's float64 bits, interval, branch, drop
	wireCacheSteps = "cache_steps"  // a static rule's steps, exact integers
	wireCacheSlot  = "cache_slot/"  // cache_slot/<window>/<branch>: [expert]
	wireCacheState = "cache_state/" // cache_state/<window>/<branch>/<row>/<name>
	wireCacheLog   = "cache_log/"   // cache_log/<row>: [calls, logWidth] step, expert, branch, window, computed (exact integers), value, change
)

// refState is the name under which a row's state keeps the denoiser input of the call that
// computed it (the reference of CacheRecord.Change); it travels with the model's states.
const refState = "pipeline.input"

// logWidth is one cache record's width in a hand-off: five exact integers, the value and
// the change.
const logWidth = 5*limbs + 2

// maxCacheIndex bounds the integers a hand-off's cache may name (windows, experts, steps).
const maxCacheIndex = 1 << 20

// appendWire adds the item's cache to a hand-off: the rule and records always, the
// states unless the rule drops them at stage boundaries.
func (c *ItemCache) appendWire(m *comm.Message) {
	r := c.Rule
	drop := int64(0)
	if r.Drop {
		drop = 1
	}
	rule := intsTensor(int64(slices.Index(CacheModes, r.Mode)), int64(math.Float64bits(r.Threshold)), int64(r.Interval), int64(r.Branch), drop)
	m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireCacheRule, Tensor: rule})
	if len(r.Steps) > 0 {
		m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireCacheSteps, Tensor: intsTensor(ints64(r.Steps...)...)})
	}
	for row, recs := range c.Log {
		// Each call: step, expert, branch, window, computed as exact integers, then the
		// value compared and the latent change (float32s as they are).
		t := tensor.New(len(recs), logWidth)
		for i, rec := range recs {
			computed := 0
			if rec.Computed {
				computed = 1
			}
			copy(t.Data[i*logWidth:], intsTensor(ints64(rec.Step, rec.Expert, branchCode(rec.Branch), rec.Window, computed)...).Data)
			t.Data[i*logWidth+logWidth-2] = rec.Value
			t.Data[i*logWidth+logWidth-1] = rec.Change
		}
		m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireCacheLog + strconv.Itoa(row), Tensor: t})
	}
	if r.Drop {
		return
	}
	keys := make([]CacheSlotKey, 0, len(c.Slots))
	for k := range c.Slots {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b CacheSlotKey) int {
		if a.Window != b.Window {
			return a.Window - b.Window
		}
		return strings.Compare(a.Branch, b.Branch)
	})
	for _, k := range keys {
		s := c.Slots[k]
		prefix := fmt.Sprintf("%d/%s", k.Window, k.Branch)
		m.Tensors = append(m.Tensors, comm.NamedTensor{Name: wireCacheSlot + prefix, Tensor: intsTensor(int64(s.Expert))})
		for row, st := range s.Rows {
			for _, name := range sortedKeys(st) {
				m.Tensors = append(m.Tensors, comm.NamedTensor{Name: fmt.Sprintf("%s%s/%d/%s", wireCacheState, prefix, row, name), Tensor: st[name]})
			}
		}
	}
}

func branchCode(b string) int {
	if b == BranchUncond {
		return 1
	}
	return 0
}

// wholeIn reports whether v is an integer in [lo, hi].
func wholeIn(v float32, lo, hi int) bool {
	return v == float32(math.Trunc(float64(v))) && v >= float32(lo) && v <= float32(hi)
}

// cacheFromMessage decodes a hand-off's cache for an item of rows rows (nil when it has
// none).
func cacheFromMessage(m comm.Message, rows int) (*ItemCache, error) {
	rt := m.Tensor(wireCacheRule)
	if rt == nil {
		return nil, nil
	}
	d, err := intsOf(rt)
	if err != nil || len(d) != 5 || !inRange(d[:1], 1, int64(len(CacheModes)-1)) || !inRange(d[2:4], 0, math.MaxInt32) || !inRange(d[4:], 0, 1) {
		return nil, fmt.Errorf("%w: hand-off cache rule %v (%v)", ErrCache, rt.Data, err)
	}
	rule := Cache{Mode: CacheModes[d[0]], Threshold: math.Float64frombits(uint64(d[1])), Interval: int(d[2]), Branch: int(d[3]), Drop: d[4] == 1}
	if st := m.Tensor(wireCacheSteps); st != nil {
		steps, err := intsOf(st)
		if err != nil || !inRange(steps, 0, maxCacheIndex) {
			return nil, fmt.Errorf("%w: hand-off cache steps %v (%v)", ErrCache, st.Data, err)
		}
		for _, v := range steps {
			if len(rule.Steps) > 0 && int(v) <= rule.Steps[len(rule.Steps)-1] {
				return nil, fmt.Errorf("%w: hand-off cache steps %v", ErrCache, steps)
			}
			rule.Steps = append(rule.Steps, int(v))
		}
	}
	c := NewItemCache(rule, rows)
	for _, nt := range m.Tensors {
		switch {
		case strings.HasPrefix(nt.Name, wireCacheLog):
			row, err := strconv.Atoi(strings.TrimPrefix(nt.Name, wireCacheLog))
			t := nt.Tensor
			if err != nil || row < 0 || row >= rows || len(t.Shape) != 2 || t.Shape[1] != logWidth || len(t.Data) != t.Shape[0]*logWidth {
				return nil, fmt.Errorf("%w: hand-off cache log %q %v", ErrCache, nt.Name, t.Shape)
			}
			for i := range t.Shape[0] {
				rec := t.Data[i*logWidth : (i+1)*logWidth]
				v, err := intsOf(&tensor.Dense{Shape: []int{5, limbs}, Data: rec[:logWidth-2]})
				if err != nil || !inRange(v[:2], 0, maxCacheIndex) || !inRange(v[2:3], 0, 1) || !inRange(v[3:4], 0, maxCacheIndex) || !inRange(v[4:], 0, 1) {
					return nil, fmt.Errorf("%w: hand-off cache log %q record %v", ErrCache, nt.Name, rec)
				}
				c.Log[row] = append(c.Log[row], CacheRecord{Step: int(v[0]), Expert: int(v[1]), Branch: []string{BranchCond, BranchUncond}[v[2]],
					Window: int(v[3]), Computed: v[4] == 1, Value: rec[logWidth-2], Change: rec[logWidth-1]})
			}
		case strings.HasPrefix(nt.Name, wireCacheSlot):
			key, err := parseSlotKey(strings.TrimPrefix(nt.Name, wireCacheSlot))
			expert, ierr := intsOf(nt.Tensor)
			if err != nil || ierr != nil || len(expert) != 1 || !inRange(expert, 0, maxCacheIndex) {
				return nil, fmt.Errorf("%w: hand-off cache slot %q", ErrCache, nt.Name)
			}
			c.slotFor(key, rows).Expert = int(expert[0])
		case strings.HasPrefix(nt.Name, wireCacheState):
			parts := strings.SplitN(strings.TrimPrefix(nt.Name, wireCacheState), "/", 4)
			if len(parts) != 4 || parts[3] == "" {
				return nil, fmt.Errorf("%w: hand-off cache state %q", ErrCache, nt.Name)
			}
			key, err := parseSlotKey(parts[0] + "/" + parts[1])
			row, rerr := strconv.Atoi(parts[2])
			if err != nil || rerr != nil || row < 0 || row >= rows {
				return nil, fmt.Errorf("%w: hand-off cache state %q", ErrCache, nt.Name)
			}
			s := c.slotFor(key, rows)
			if s.Rows[row] == nil {
				s.Rows[row] = model.CacheState{}
			}
			s.Rows[row][parts[3]] = nt.Tensor
		}
	}
	return c, nil
}

// slotFor returns key's slot, creating an empty one of rows rows.
func (c *ItemCache) slotFor(key CacheSlotKey, rows int) *CacheSlot {
	s := c.Slots[key]
	if s == nil {
		s = &CacheSlot{Rows: make([]model.CacheState, rows)}
		c.Slots[key] = s
	}
	return s
}

func parseSlotKey(s string) (CacheSlotKey, error) {
	w, b, ok := strings.Cut(s, "/")
	win, err := strconv.Atoi(w)
	if !ok || err != nil || win < 0 || win > maxCacheIndex || (b != BranchCond && b != BranchUncond) {
		return CacheSlotKey{}, fmt.Errorf("%w: cache slot %q", ErrCache, s)
	}
	return CacheSlotKey{Window: win, Branch: b}, nil
}

// cachedCall is a step's cached model call: the call, and for each of its rows the slot
// and the item row whose state it carries.
type cachedCall struct {
	call   *model.CacheCall
	slots  []*CacheSlot
	branch []string
	sample []int
	expert int
}

// cacheCall builds the cache side of step k's model call on the item's rows for window
// win: one call row per input row (both CFG halves, uncond first, when guided on one rank;
// this rank's half under CFG parallelism), each with its slot's state for the step's
// expert. It returns nil when the item has no cache.
func (s *Stepper) cacheCall(it *Item, k, win, inRows int, guided bool) *cachedCall {
	c := it.Cache
	if c == nil || !c.Rule.On() {
		return nil
	}
	rows := len(it.Samples)
	expert := 0
	if e := s.expertAt(k); e != nil {
		expert = e.ID
	}
	cc := &cachedCall{call: model.NewCacheCall(inRows, c.Rule.Decision(k)), expert: expert}
	cc.call.Threshold, cc.call.Branch, cc.call.Mode = c.Rule.Threshold, c.Rule.Branch, c.Rule.Mode
	for i := range inRows {
		branch, row := BranchCond, i
		switch {
		case guided && s.CFG == nil && i < rows:
			branch = BranchUncond
		case guided && s.CFG == nil:
			row = i - rows
		case guided && s.CFG.Index() == 0:
			branch = BranchUncond
		}
		slot := c.slot(CacheSlotKey{Window: win, Branch: branch}, expert, rows)
		cc.slots = append(cc.slots, slot)
		cc.branch = append(cc.branch, branch)
		cc.sample = append(cc.sample, row)
		cc.call.Rows[i].State = slot.Rows[row]
	}
	return cc
}

// finish stores the call's new states and appends each sample's records of step k (cond,
// then uncond, as diffusers calls them). in is the call's input, a row per call row: a
// computing row keeps its input in its state (refState), a reusing one measures its input's
// change from it. Under CFG parallelism the pair exchanges its halves' decisions first, so
// both ranks hold every record.
func (cc *cachedCall) finish(ctx context.Context, s *Stepper, it *Item, k, win int, guided bool, in *tensor.Dense) error {
	per := in.Len() / len(cc.call.Rows)
	change := make([]float32, len(cc.call.Rows))
	for i, r := range cc.call.Rows {
		x := in.Data[i*per : (i+1)*per]
		change[i] = float32(math.NaN())
		switch {
		case r.Computed && r.State != nil:
			r.State[refState] = &tensor.Dense{Shape: []int{per}, Data: slices.Clone(x)}
		case !r.Computed && r.State != nil:
			if ref := r.State[refState]; ref != nil && ref.Len() == per {
				change[i] = relChange(x, ref.Data)
			}
		}
		cc.slots[i].Rows[cc.sample[i]] = r.State
	}
	rows := len(it.Samples)
	type result struct {
		computed      bool
		value, change float32
	}
	res := map[string][]result{}
	for i, r := range cc.call.Rows {
		b := cc.branch[i]
		if res[b] == nil {
			res[b] = make([]result, rows)
		}
		res[b][cc.sample[i]] = result{r.Computed, float32(r.Value), change[i]}
	}
	if guided && s.CFG != nil {
		mine := tensor.New(rows, 3)
		for i, r := range cc.call.Rows {
			if r.Computed {
				mine.Data[3*i] = 1
			}
			mine.Data[3*i+1] = float32(r.Value)
			mine.Data[3*i+2] = change[i]
		}
		u, c, err := s.CFG.Exchange(ctx, mine)
		if err != nil {
			return fmt.Errorf("cfg exchange of cache decisions: %w", err)
		}
		if u.Len() != 3*rows || c.Len() != 3*rows {
			return fmt.Errorf("cfg exchange of cache decisions: %v and %v for %d rows", u.Shape, c.Shape, rows)
		}
		for b, t := range map[string]*tensor.Dense{BranchUncond: u, BranchCond: c} {
			res[b] = make([]result, rows)
			for r := range rows {
				res[b][r] = result{t.Data[3*r] == 1, t.Data[3*r+1], t.Data[3*r+2]}
			}
		}
	}
	for row := range rows {
		for _, b := range []string{BranchCond, BranchUncond} {
			if rs := res[b]; rs != nil {
				it.Cache.Log[row] = append(it.Cache.Log[row], CacheRecord{Step: k, Expert: cc.expert, Branch: b, Window: win,
					Computed: rs[row].computed, Value: rs[row].value, Change: rs[row].change})
			}
		}
	}
	return nil
}

// relChange is |x - ref| / |ref| (L2, summed in float64 in order: the same bits on every
// rank), NaN when ref is zero.
func relChange(x, ref []float32) float32 {
	var diff, base float64
	for i, r := range ref {
		d := float64(x[i]) - float64(r)
		diff += d * d
		base += float64(r) * float64(r)
	}
	if base == 0 {
		return float32(math.NaN())
	}
	return float32(math.Sqrt(diff / base))
}

// predictCached is predict for a cached call.
func (s *Stepper) predictCached(ctx context.Context, den model.Denoiser, in model.Input, cc *model.CacheCall) (*tensor.Dense, float64, error) {
	rows := float64(in.Rows())
	work := func() float64 {
		if cc.Work > 0 {
			return cc.Work
		}
		return rows
	}
	if s.CP == nil {
		c, ok := den.(model.StepCacher)
		if !ok {
			return nil, 0, fmt.Errorf("%w: the model (%T) has no step cache", ErrCache, den)
		}
		out, err := c.PredictCached(ctx, in, cc)
		return out, work(), err
	}
	c, ok := den.(model.FrameStepCacher)
	if !ok {
		return nil, 0, fmt.Errorf("%w: the model (%T) has no context-parallel step cache", ErrCache, den)
	}
	p := s.CP.Part
	local := in
	local.Latents = sliceFrames(in.Latents, p.Lo, p.Hi)
	out, err := c.PredictFramesCached(ctx, local, p, cc)
	return out, work() * float64(p.Hi-p.Lo) / float64(p.Total), err
}
