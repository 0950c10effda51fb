package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vdpp/vdpp/comm"
)

// Workload is the source and the sink of a run: the first stage asks it for each group's
// initial item, the last stage gives it each finished item.
type Workload interface {
	// Prepare builds the initial item (latent, conditioning, guidance) of a group at step 0.
	Prepare(ctx context.Context, group int64, samples []int64) (*Item, error)
	// Finish consumes an item that has run every step.
	Finish(ctx context.Context, it *Item) error
}

// Event is one interval of a rank's timeline, for benchmarks and traces.
type Event struct {
	Kind         string // "prepare", "compute", "send", "recv", "wait", "finish"
	Group        int64
	Samples      []int64
	Step0, Step1 int
	Start, End   time.Time
}

// Config is everything one stage's driver needs.
type Config struct {
	Plan       []Range
	Stage      int // index into Plan
	PrevRank   int // rank that feeds this stage (ignored on the first stage)
	NextRank   int // rank this stage feeds (ignored on the last stage)
	TotalSteps int
	NumSamples int
	MicroBatch int
	// Replica and Replicas split the items over data-parallel replicas: this stage handles
	// the items g with g % Replicas == Replica (default: one replica, every item).
	Replica, Replicas int

	Transport comm.Transport
	Stepper   *Stepper
	Workload  Workload
	// Spread shares the last stage's finishing work over ranks when Workload is a
	// PartWorkload (see Spread); the zero value leaves it all to the last stage. Every
	// rank of the replica gets the same Spread.
	Spread Spread

	// SendQueue bounds the hand-offs waiting for the sender (default 2); when full, the
	// compute loop waits, so a slow successor slows its predecessor instead of piling up.
	SendQueue int
	// InboxSize bounds received items waiting for compute (default 4).
	InboxSize int
	// PrepareAhead is how many items the first stage prepares in the background ahead of
	// the one it computes (default 1; negative: prepare synchronously). Preparing (noise,
	// conditioning) then overlaps the denoising instead of lengthening stage 0.
	PrepareAhead int
	// Now and OnEvent are optional; OnEvent receives the timeline (from several goroutines,
	// so it must be safe for concurrent use).
	Now     func() time.Time
	OnEvent func(Event)
	Log     *slog.Logger
}

func (c *Config) defaults() error {
	if err := ValidatePlan(c.Plan, c.TotalSteps); err != nil {
		return err
	}
	if c.Stage < 0 || c.Stage >= len(c.Plan) {
		return fmt.Errorf("%w: stage %d of %d", ErrBadPlan, c.Stage, len(c.Plan))
	}
	if c.MicroBatch < 1 {
		c.MicroBatch = 1
	}
	if c.NumSamples < 1 {
		return fmt.Errorf("pipeline: %d samples", c.NumSamples)
	}
	if c.Replicas < 1 {
		c.Replicas = 1
	}
	if c.Replica < 0 || c.Replica >= c.Replicas {
		return fmt.Errorf("pipeline: replica %d of %d", c.Replica, c.Replicas)
	}
	if c.SendQueue < 1 {
		c.SendQueue = 2
	}
	if c.InboxSize < 1 {
		c.InboxSize = 4
	}
	if c.PrepareAhead == 0 {
		c.PrepareAhead = 1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.OnEvent == nil {
		c.OnEvent = func(Event) {}
	}
	if c.Transport != nil {
		// Every unit of work tells the peers this rank is making progress, so a peer waiting
		// for its hand-off sizes its timeout from the measured step time (comm.Progress).
		onEvent, tr := c.OnEvent, c.Transport
		c.OnEvent = func(e Event) {
			switch e.Kind {
			case "compute", "prepare", "finish", "decode":
				comm.ReportProgress(tr, e.End.Sub(e.Start))
			}
			onEvent(e)
		}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Run drives one stage until every group has passed through it. It returns the first error
// of the compute loop, the receiver or the sender, wrapped with the stage and group.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	groups := Groups(cfg.NumSamples, cfg.MicroBatch)
	mine := ReplicaItems(len(groups), cfg.Replica, cfg.Replicas)
	rng := cfg.Plan[cfg.Stage]
	st := NewStage(rng, cfg.TotalSteps, mine)
	first, last := rng.Start == 0, rng.End == cfg.TotalSteps
	where := fmt.Sprintf("stage %d (steps %v)", cfg.Stage, rng)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 8)

	inbox := make(chan *Item, cfg.InboxSize)
	if !first {
		go cfg.receive(ctx, len(mine), inbox, errc, where)
	}
	var prepared chan preparedItem
	if first && cfg.PrepareAhead > 0 {
		prepared = make(chan preparedItem, cfg.PrepareAhead)
		go cfg.prepareAhead(ctx, mine, groups, prepared)
	}
	outbox := make(chan *Item, cfg.SendQueue)
	sent := make(chan struct{})
	if last {
		close(sent)
	} else {
		go cfg.send(ctx, outbox, sent, errc, where)
	}

	fail := func(err error) error {
		cancel()
		return err
	}
	me := 0
	if cfg.Transport != nil {
		me = cfg.Transport.Rank()
	}
	sp, err := newSpreader(ctx, &cfg, me, last, mine, groups, errc, where)
	if err != nil {
		return fail(err)
	}
	var jobs <-chan comm.Message // a helper's handed-out parts; nil otherwise
	if sp != nil {
		jobs = sp.jobs
	}
	for {
		// Handed-out parts go first: the last stage is waiting for them.
		select {
		case m := <-jobs:
			if err := sp.serve(ctx, m); err != nil {
				return fail(err)
			}
			continue
		default:
		}
		a := st.Next()
		switch a.Kind {
		case ActDone:
			if err := sp.drain(ctx, errc); err != nil {
				return fail(err)
			}
			close(outbox)
			select {
			case <-sent:
				select {
				case err := <-errc:
					return err
				default:
					return nil
				}
			case err := <-errc:
				return fail(err)
			}
		case ActNone:
			t0 := cfg.Now()
			select {
			case it := <-inbox:
				cfg.OnEvent(Event{Kind: "wait", Group: it.Group, Start: t0, End: cfg.Now()})
				if err := st.Deliver(it); err != nil {
					return fail(fmt.Errorf("%s: %w", where, err))
				}
			case m := <-jobs:
				if err := sp.serve(ctx, m); err != nil {
					return fail(err)
				}
			case err := <-errc:
				return fail(err)
			case <-ctx.Done():
				return fail(fmt.Errorf("%s: %w", where, ctx.Err()))
			}
		case ActPrepare:
			var p preparedItem
			if prepared != nil {
				t0 := cfg.Now()
				select {
				case p = <-prepared:
				case <-ctx.Done():
					return fail(fmt.Errorf("%s: %w", where, ctx.Err()))
				}
				if t1 := cfg.Now(); t1.Sub(t0) > 0 {
					cfg.OnEvent(Event{Kind: "wait", Group: a.Group, Start: t0, End: t1})
				}
			} else {
				p = cfg.prepare(ctx, a.Group, groups[a.Group])
			}
			if p.err != nil {
				return fail(fmt.Errorf("%s: prepare group %d: %w", where, a.Group, p.err))
			}
			it := p.item
			if err := st.Prepared(it); err != nil {
				return fail(fmt.Errorf("%s: %w", where, err))
			}
		case ActCompute:
			t0 := cfg.Now()
			comm.ReportWorking(cfg.Transport, time.Now())
			if err := cfg.Stepper.Step(ctx, a.Item); err != nil {
				return fail(fmt.Errorf("%s: %w", where, err))
			}
			cfg.OnEvent(Event{Kind: "compute", Group: a.Group, Samples: a.Item.Samples, Step0: a.Step, Step1: a.Step + 1, Start: t0, End: cfg.Now()})
			if err := st.Computed(); err != nil {
				return fail(fmt.Errorf("%s: %w", where, err))
			}
		case ActForward:
			for queued := false; !queued; {
				select {
				case outbox <- a.Item:
					queued = true
				case m := <-jobs: // serve parts while the successor is busy
					if err := sp.serve(ctx, m); err != nil {
						return fail(err)
					}
				case err := <-errc:
					return fail(err)
				case <-ctx.Done():
					return fail(fmt.Errorf("%s: %w", where, ctx.Err()))
				}
			}
			if err := st.Forwarded(); err != nil {
				return fail(fmt.Errorf("%s: %w", where, err))
			}
		case ActFinish:
			if sp != nil {
				if err := sp.finish(ctx, a.Item); err != nil {
					return fail(fmt.Errorf("%s: finish group %d: %w", where, a.Group, err))
				}
				if err := st.Finished(); err != nil {
					return fail(fmt.Errorf("%s: %w", where, err))
				}
				continue
			}
			t0 := cfg.Now()
			comm.ReportWorking(cfg.Transport, time.Now())
			if err := cfg.Workload.Finish(ctx, a.Item); err != nil {
				return fail(fmt.Errorf("%s: finish group %d: %w", where, a.Group, err))
			}
			cfg.OnEvent(Event{Kind: "finish", Group: a.Group, Samples: a.Item.Samples, Start: t0, End: cfg.Now()})
			if err := st.Finished(); err != nil {
				return fail(fmt.Errorf("%s: %w", where, err))
			}
		}
	}
}

type preparedItem struct {
	item *Item
	err  error
}

// prepare builds one group's initial item and records it on the timeline.
func (cfg *Config) prepare(ctx context.Context, group int64, samples []int64) preparedItem {
	t0 := cfg.Now()
	it, err := cfg.Workload.Prepare(ctx, group, samples)
	if err == nil {
		cfg.OnEvent(Event{Kind: "prepare", Group: group, Samples: it.Samples, Start: t0, End: cfg.Now()})
	}
	return preparedItem{it, err}
}

// prepareAhead prepares the items in order into out (bounded), stopping at the first error.
func (cfg *Config) prepareAhead(ctx context.Context, items []int64, groups [][]int64, out chan<- preparedItem) {
	for _, g := range items {
		p := cfg.prepare(ctx, g, groups[g])
		select {
		case out <- p:
		case <-ctx.Done():
			return
		}
		if p.err != nil {
			return
		}
	}
}

// ReplicaItems lists the item ids of replica r of n for a run of items items: g with
// g % n == r, in order. Round-robin keeps every replica's share within one item of the others.
func ReplicaItems(items, r, n int) []int64 {
	var out []int64
	for g := r; g < items; g += n {
		out = append(out, int64(g))
	}
	return out
}

// receive reads exactly n hand-offs from the previous rank into inbox.
func (cfg *Config) receive(ctx context.Context, n int, inbox chan<- *Item, errc chan<- error, where string) {
	for i := 0; i < n; i++ {
		m, err := cfg.Transport.Recv(ctx, cfg.PrevRank)
		// The bytes cross while this rank computes (the transport reads in the background);
		// the event covers only decoding the hand-off, not the wait for it.
		t0 := cfg.Now()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: receive hand-off %d of %d from rank %d: %w", where, i+1, n, cfg.PrevRank, err)
			}
			return
		}
		it, err := ItemFromMessage(m)
		if err != nil {
			errc <- fmt.Errorf("%s: from rank %d: %w", where, cfg.PrevRank, err)
			return
		}
		cfg.OnEvent(Event{Kind: "recv", Group: it.Group, Samples: it.Samples, Step0: it.Step, Step1: it.Step, Start: t0, End: cfg.Now()})
		select {
		case inbox <- it:
		case <-ctx.Done():
			return
		}
	}
}

// send hands items to the next rank in order, in the background of the compute loop.
func (cfg *Config) send(ctx context.Context, outbox <-chan *Item, done chan<- struct{}, errc chan<- error, where string) {
	defer close(done)
	for it := range outbox {
		t0 := cfg.Now()
		if err := cfg.Transport.Send(ctx, cfg.NextRank, it.ToMessage()); err != nil {
			errc <- fmt.Errorf("%s: send group %d to rank %d: %w", where, it.Group, cfg.NextRank, err)
			return
		}
		cfg.OnEvent(Event{Kind: "send", Group: it.Group, Samples: it.Samples, Step0: it.Step, Step1: it.Step, Start: t0, End: cfg.Now()})
	}
}
