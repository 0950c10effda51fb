package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/tensor"
)

// PartWorkload is a Workload whose finishing work (a sample's decode) splits into parts that
// any rank can compute from the sample's final latent, independently of the other parts
// (SVD's decode chunks). With Config.Spread the last stage hands the parts out over several
// ranks instead of computing them all itself; a part's bits do not depend on where it runs,
// so the joined result is the one-rank result exactly.
type PartWorkload interface {
	Workload
	// Parts is the number of parts of one sample's finishing work (>= 1), the same on
	// every rank of the spread.
	Parts() int
	// FinishPart computes part of a sample's finishing work from its final latent
	// [T, C, H, W]. It runs on the rank the part is handed to, on its compute loop.
	FinishPart(ctx context.Context, sample int64, latent *tensor.Dense, part int) (*tensor.Dense, error)
	// JoinParts (last stage) consumes a sample's parts, in part order. It runs on a
	// goroutine of its own, one sample at a time, in the order the samples finish.
	JoinParts(ctx context.Context, sample int64, latent *tensor.Dense, parts []*tensor.Dense) error
}

// Spread shares the finishing work of a replica's items over several ranks. Part j of the
// run (counting the replica's items in order, their samples in row order, each sample's
// parts in order) goes to Ranks[j % len(Ranks)], so every rank knows from the plan alone
// how many parts it will compute. The last stage (Last) hands the parts out over a channel
// of their own as soon as an item has run its steps, computes its own parts, and joins a
// sample's parts in the background as they come back; a helper computes a part at its
// next step boundary, ahead of its own denoising (the last stage waits for it), and sends
// the frames back.
type Spread struct {
	// Last is the rank of the replica's last stage.
	Last int
	// Ranks compute the parts, in hand-out order; Last may be among them.
	Ranks []int
}

// Active reports whether the spread moves work off the last stage.
func (s Spread) Active() bool { return len(s.Ranks) > 1 || len(s.Ranks) == 1 && s.Ranks[0] != s.Last }

// Check reports a spread the world cannot run.
func (s Spread) Check(world int) error {
	if s.Last < 0 || s.Last >= world {
		return fmt.Errorf("pipeline: spread: last stage rank %d outside the world of %d", s.Last, world)
	}
	seen := map[int]bool{}
	for _, r := range s.Ranks {
		if r < 0 || r >= world || seen[r] {
			return fmt.Errorf("pipeline: spread: ranks %v: rank %d repeated or outside the world of %d", s.Ranks, r, world)
		}
		seen[r] = true
	}
	return nil
}

// members are the ranks of the spread's channel: Last, then the other ranks.
func (s Spread) members() []int {
	out := []int{s.Last}
	for _, r := range s.Ranks {
		if r != s.Last {
			out = append(out, r)
		}
	}
	return out
}

// PartsOf returns how many parts rank computes for the given items of a run cut into groups
// (Groups), with parts parts per sample.
func (s Spread) PartsOf(rank int, items []int64, groups [][]int64, parts int) int {
	n := 0
	j := 0
	for _, g := range items {
		for range groups[g] {
			for range parts {
				if s.Ranks[j%len(s.Ranks)] == rank {
					n++
				}
				j++
			}
		}
	}
	return n
}

// Wire names of a part's job and result.
const (
	wirePartLatent = "latent"
	wirePartOut    = "part"
)

// spreader is one rank's share of a Spread inside Run.
type spreader struct {
	cfg    *Config
	sp     Spread
	pw     PartWorkload
	tr     comm.TaggedTransport
	tag    uint16
	me     int
	parts  int
	next   int // last stage: the next part's index j
	where  string
	jobs   chan comm.Message // helper: parts handed to this rank
	njobs  int               // helper: how many it will get
	served int
	out    chan comm.Message // helper: results, to the sender
	outEnd chan struct{}

	pending chan *pendingSample // last stage: samples waiting for their parts
	joined  chan struct{}
}

type pendingSample struct {
	group  int64
	sample int64
	latent *tensor.Dense
	parts  []*tensor.Dense // nil where a helper computes it
	from   []int           // the rank of each part
}

// newSpreader sets up rank me's share, or returns nil when cfg has no spread or the rank
// takes no part in it.
func newSpreader(ctx context.Context, cfg *Config, me int, last bool, items []int64, groups [][]int64, errc chan<- error, where string) (*spreader, error) {
	sp := cfg.Spread
	pw, ok := cfg.Workload.(PartWorkload)
	if !sp.Active() || !ok {
		return nil, nil
	}
	if cfg.Transport == nil {
		return nil, fmt.Errorf("%s: decode spread over %v needs a transport", where, sp.Ranks)
	}
	if err := sp.Check(cfg.Transport.Size()); err != nil {
		return nil, err
	}
	if last != (me == sp.Last) {
		return nil, fmt.Errorf("%s: spread: rank %d is the last stage but the spread's last stage is %d", where, me, sp.Last)
	}
	if !last && !slices.Contains(sp.Ranks, me) {
		return nil, nil
	}
	g, err := comm.NewNamedGroup(cfg.Transport, "decode", sp.members())
	if err != nil {
		return nil, fmt.Errorf("%s: spread: %w", where, err)
	}
	s := &spreader{cfg: cfg, sp: sp, pw: pw, tr: cfg.Transport.(comm.TaggedTransport), tag: g.Tag(), me: me,
		parts: max(1, pw.Parts()), where: where}
	if last {
		// Room for every sample: the compute loop never waits for a join (whose helpers'
		// frames may queue behind hand-offs the compute loop has yet to take).
		samples := 0
		for _, g := range items {
			samples += len(groups[g])
		}
		s.pending = make(chan *pendingSample, samples)
		s.joined = make(chan struct{})
		go s.join(ctx, errc)
		return s, nil
	}
	s.njobs = sp.PartsOf(me, items, groups, s.parts)
	s.jobs = make(chan comm.Message, s.njobs)
	s.out = make(chan comm.Message, s.njobs)
	s.outEnd = make(chan struct{})
	go s.receiveJobs(ctx, errc)
	go s.sendResults(ctx, errc)
	return s, nil
}

// receiveJobs (helper) reads the parts handed to this rank. A receive timeout is not a
// silent peer here: the first part comes only once the pipeline has filled, and the last
// ones when the last stage has worked off its backlog, both longer than a hand-off's wait.
// A last stage that fails closes its links (the receive then fails) and its neighbours'
// hand-offs time out.
func (s *spreader) receiveJobs(ctx context.Context, errc chan<- error) {
	for i := 0; i < s.njobs; i++ {
		m, err := s.tr.RecvTag(ctx, s.sp.Last, s.tag)
		if errors.Is(err, comm.ErrTimeout) {
			i--
			continue
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: receive decode part %d of %d from rank %d: %w", s.where, i+1, s.njobs, s.sp.Last, err)
			}
			return
		}
		s.jobs <- m // buffered for every part: never blocks
	}
}

// sendResults (helper) returns the computed parts to the last stage, in order.
func (s *spreader) sendResults(ctx context.Context, errc chan<- error) {
	defer close(s.outEnd)
	for m := range s.out {
		if err := s.tr.Send(ctx, s.sp.Last, m); err != nil {
			errc <- fmt.Errorf("%s: send decode part %d of sample %d to rank %d: %w", s.where, m.Step, m.Sample, s.sp.Last, err)
			return
		}
	}
}

// serve (helper) computes one handed-out part and queues its result.
func (s *spreader) serve(ctx context.Context, m comm.Message) error {
	lat := m.Tensor(wirePartLatent)
	if lat == nil {
		return fmt.Errorf("%s: decode part %d of sample %d carries no latent", s.where, m.Step, m.Sample)
	}
	t0 := s.cfg.Now()
	out, err := s.pw.FinishPart(ctx, m.Sample, lat, int(m.Step))
	if err != nil {
		return fmt.Errorf("%s: sample %d: decode part %d: %w", s.where, m.Sample, m.Step, err)
	}
	s.cfg.OnEvent(Event{Kind: "decode", Group: -1, Samples: []int64{m.Sample}, Step0: int(m.Step), Step1: int(m.Step) + 1, Start: t0, End: s.cfg.Now()})
	s.served++
	s.out <- comm.Message{Sample: m.Sample, Step: m.Step, Tag: s.tag, Tensors: []comm.NamedTensor{{Name: wirePartOut, Tensor: out}}}
	return nil
}

// finish (last stage) hands out the parts of a finished item, computes its own, and queues
// the item's samples for joining.
func (s *spreader) finish(ctx context.Context, it *Item) error {
	per := it.Latent.Len() / len(it.Samples)
	shape := it.Latent.Shape[1:]
	var samples []*pendingSample
	for r, smp := range it.Samples {
		lat := &tensor.Dense{Shape: shape, Data: it.Latent.Data[r*per : (r+1)*per]}
		ps := &pendingSample{group: it.Group, sample: smp, latent: lat, parts: make([]*tensor.Dense, s.parts), from: make([]int, s.parts)}
		for p := range s.parts {
			rank := s.sp.Ranks[s.next%len(s.sp.Ranks)]
			s.next++
			ps.from[p] = rank
			if rank == s.me {
				continue
			}
			m := comm.Message{Sample: smp, Step: int32(p), Tag: s.tag, Tensors: []comm.NamedTensor{{Name: wirePartLatent, Tensor: lat}}}
			if err := s.tr.Send(ctx, rank, m); err != nil {
				return fmt.Errorf("%s: hand decode part %d of sample %d to rank %d: %w", s.where, p, smp, rank, err)
			}
		}
		samples = append(samples, ps)
	}
	// The helpers work while this rank computes its own parts.
	for _, ps := range samples {
		for p, rank := range ps.from {
			if rank != s.me {
				continue
			}
			t0 := s.cfg.Now()
			out, err := s.pw.FinishPart(ctx, ps.sample, ps.latent, p)
			if err != nil {
				return fmt.Errorf("sample %d: decode part %d: %w", ps.sample, p, err)
			}
			s.cfg.OnEvent(Event{Kind: "decode", Group: it.Group, Samples: []int64{ps.sample}, Step0: p, Step1: p + 1, Start: t0, End: s.cfg.Now()})
			ps.parts[p] = out
		}
		select {
		case s.pending <- ps:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// join (last stage) collects each pending sample's parts from the helpers, in order, and
// joins them.
func (s *spreader) join(ctx context.Context, errc chan<- error) {
	defer close(s.joined)
	for ps := range s.pending {
		for p, rank := range ps.from {
			if rank == s.me {
				continue
			}
			m, err := s.tr.RecvTag(ctx, rank, s.tag)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					errc <- fmt.Errorf("%s: receive decode part %d of sample %d from rank %d: %w", s.where, p, ps.sample, rank, err)
				}
				return
			}
			out := m.Tensor(wirePartOut)
			if m.Sample != ps.sample || int(m.Step) != p || out == nil {
				errc <- fmt.Errorf("%s: %w: rank %d returned part %d of sample %d, want part %d of sample %d", s.where, ErrProtocol, rank, m.Step, m.Sample, p, ps.sample)
				return
			}
			ps.parts[p] = out
		}
		t0 := s.cfg.Now()
		if err := s.pw.JoinParts(ctx, ps.sample, ps.latent, ps.parts); err != nil {
			errc <- fmt.Errorf("%s: finish group %d: sample %d: %w", s.where, ps.group, ps.sample, err)
			return
		}
		s.cfg.OnEvent(Event{Kind: "finish", Group: ps.group, Samples: []int64{ps.sample}, Start: t0, End: s.cfg.Now()})
	}
}

// drain ends the rank's share once its stage has handled every item: a helper computes the
// parts still to come and waits for its results to be sent; the last stage waits until
// every sample is joined. A nil spreader has nothing to drain.
func (s *spreader) drain(ctx context.Context, errc <-chan error) error {
	if s == nil {
		return nil
	}
	var done chan struct{}
	if s.pending != nil {
		close(s.pending)
		done = s.joined
	} else {
		for s.served < s.njobs {
			select {
			case m := <-s.jobs:
				if err := s.serve(ctx, m); err != nil {
					return err
				}
			case err := <-errc:
				return err
			case <-ctx.Done():
				return fmt.Errorf("%s: %w", s.where, ctx.Err())
			}
		}
		close(s.out)
		done = s.outEnd
	}
	select {
	case <-done:
	case err := <-errc:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", s.where, ctx.Err())
	}
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}
