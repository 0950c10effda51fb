package pipeline

import (
	"errors"
	"fmt"
)

// ErrProtocol is returned when a stage is fed something its plan does not allow (an item at
// the wrong step, a group twice, more groups than the run has).
var ErrProtocol = errors.New("pipeline: protocol error")

// ActionKind says what the driver must do next for a stage.
type ActionKind int

const (
	// ActNone: nothing to do until an item is delivered.
	ActNone ActionKind = iota
	// ActPrepare: build the initial latent and conditioning of Action.Group (first stage).
	ActPrepare
	// ActCompute: run step Action.Step on Action.Item, then call Computed.
	ActCompute
	// ActForward: hand Action.Item to the next stage, then call Forwarded.
	ActForward
	// ActFinish: the item has run every step; decode/record it, then call Finished.
	ActFinish
	// ActDone: the stage has handled every group.
	ActDone
)

func (k ActionKind) String() string {
	return [...]string{"none", "prepare", "compute", "forward", "finish", "done"}[k]
}

// Action is one instruction from a Stage to its driver.
type Action struct {
	Kind  ActionKind
	Group int64
	Item  *Item
	Step  int
}

// Stage is the pure state machine of one pipeline stage. It owns no goroutines and does no
// I/O: the driver asks Next, performs the action and reports back. Items are processed in
// arrival order, each running all of the stage's steps before the next starts (depth first,
// which minimises a sample's latency without lowering steady throughput).
type Stage struct {
	rng         Range
	first, last bool
	groups      []int64        // the items this stage handles, in the order the first stage makes them
	member      map[int64]bool // set of groups

	nextPrepare int     // first stage: index into groups of the next item to create
	queue       []*Item // delivered, not started
	cur         *Item   // item being computed
	inFlight    bool    // an action on cur is outstanding
	handled     int     // groups forwarded or finished
	seen        map[int64]bool
}

// NewStage returns the state machine for the stage running rng of a plan whose steps end at
// totalSteps, handling the items (group ids) listed in groups — all of a run's items, or a
// data-parallel replica's share of them.
func NewStage(rng Range, totalSteps int, groups []int64) *Stage {
	member := make(map[int64]bool, len(groups))
	for _, g := range groups {
		member[g] = true
	}
	return &Stage{
		rng:    rng,
		first:  rng.Start == 0,
		last:   rng.End == totalSteps,
		groups: append([]int64(nil), groups...),
		member: member,
		seen:   map[int64]bool{},
	}
}

// Deliver queues an item received from the previous stage.
func (s *Stage) Deliver(it *Item) error {
	switch {
	case s.first:
		return fmt.Errorf("%w: stage %v is first and receives nothing (group %d)", ErrProtocol, s.rng, it.Group)
	case it.Step != s.rng.Start:
		return fmt.Errorf("%w: stage %v got group %d at step %d", ErrProtocol, s.rng, it.Group, it.Step)
	case !s.member[it.Group]:
		return fmt.Errorf("%w: stage %v got group %d, which is not one of its %d", ErrProtocol, s.rng, it.Group, len(s.groups))
	case s.seen[it.Group]:
		return fmt.Errorf("%w: stage %v got group %d twice", ErrProtocol, s.rng, it.Group)
	}
	s.seen[it.Group] = true
	s.queue = append(s.queue, it)
	return nil
}

// Next returns the next action. While an action is outstanding it returns ActNone.
func (s *Stage) Next() Action {
	if s.inFlight {
		return Action{Kind: ActNone}
	}
	if s.cur == nil {
		switch {
		case s.handled == len(s.groups):
			return Action{Kind: ActDone}
		case s.first && s.nextPrepare < len(s.groups):
			s.inFlight = true
			return Action{Kind: ActPrepare, Group: s.groups[s.nextPrepare]}
		case len(s.queue) > 0:
			s.cur, s.queue = s.queue[0], s.queue[1:]
		default:
			return Action{Kind: ActNone}
		}
	}
	s.inFlight = true
	it := s.cur
	switch {
	case it.Step < s.rng.End:
		return Action{Kind: ActCompute, Group: it.Group, Item: it, Step: it.Step}
	case s.last:
		return Action{Kind: ActFinish, Group: it.Group, Item: it}
	default:
		return Action{Kind: ActForward, Group: it.Group, Item: it}
	}
}

// Prepared hands the stage the item built for an ActPrepare.
func (s *Stage) Prepared(it *Item) error {
	if !s.inFlight || s.cur != nil || !s.first || s.nextPrepare >= len(s.groups) || it.Group != s.groups[s.nextPrepare] {
		return fmt.Errorf("%w: unexpected prepared group %d", ErrProtocol, it.Group)
	}
	if it.Step != 0 {
		return fmt.Errorf("%w: prepared group %d starts at step %d", ErrProtocol, it.Group, it.Step)
	}
	s.nextPrepare++
	s.cur, s.inFlight = it, false
	return nil
}

// Computed records that the outstanding ActCompute finished; the item advances one step.
func (s *Stage) Computed() error {
	if !s.inFlight || s.cur == nil || s.cur.Step >= s.rng.End {
		return fmt.Errorf("%w: Computed without a compute in flight", ErrProtocol)
	}
	s.cur.Step++
	s.inFlight = false
	return nil
}

// Forwarded records that the outstanding ActForward was handed to the sender.
func (s *Stage) Forwarded() error { return s.release(ActForward) }

// Finished records that the outstanding ActFinish completed.
func (s *Stage) Finished() error { return s.release(ActFinish) }

func (s *Stage) release(kind ActionKind) error {
	if !s.inFlight || s.cur == nil || s.cur.Step != s.rng.End || (kind == ActFinish) != s.last {
		return fmt.Errorf("%w: %v without one in flight", ErrProtocol, kind)
	}
	s.cur, s.inFlight = nil, false
	s.handled++
	return nil
}

// Pending returns how many groups this stage has not yet forwarded or finished.
func (s *Stage) Pending() int { return len(s.groups) - s.handled }
