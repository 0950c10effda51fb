package family

import (
	"fmt"
	"math"
	"strings"

	"github.com/vdpp/vdpp/sched"
)

// SchedulerChoice is a generation's choice of sampler: a name the model's family offers
// (Description.Schedulers; "" for the folder's own scheduler) and, for a flow-matching
// model, the flow shift (0: the folder's). The choice changes the steps' noise levels and
// updates, never the work of a step: the planner's step costs and the stage cuts stay as
// they are (a Wan 2.2 expert switch follows the schedule the folder's own scheduler gives).
type SchedulerChoice struct {
	Scheduler string  `json:"scheduler,omitempty"`
	FlowShift float64 `json:"flow_shift,omitempty"`
}

// SchedulerInfo is one sampler a family offers: its name (what --scheduler takes) and what
// it is, for help and pages.
type SchedulerInfo = sched.SamplerInfo

// SchedulerNames lists the names of the offered schedulers, in order.
func (d Description) SchedulerNames() []string {
	out := make([]string, len(d.Schedulers))
	for i, s := range d.Schedulers {
		out[i] = s.Name
	}
	return out
}

// DefaultScheduler is the folder's own scheduler: the first offered ("" when the family
// offers no choice).
func (d Description) DefaultScheduler() string {
	if len(d.Schedulers) == 0 {
		return ""
	}
	return d.Schedulers[0].Name
}

// CheckScheduler reports a choice the model cannot run, as one line wrapping ErrParams: a
// scheduler name it does not offer (naming those it does), a flow shift on a model that is
// not a flow model, a flow shift that is not a positive finite number.
func (d Description) CheckScheduler(c SchedulerChoice) error {
	if c.Scheduler != "" {
		found := false
		for _, s := range d.Schedulers {
			found = found || s.Name == c.Scheduler
		}
		if !found {
			if len(d.Schedulers) == 0 {
				return fmt.Errorf("%w: scheduler %q: this model offers no scheduler choice", ErrParams, c.Scheduler)
			}
			return fmt.Errorf("%w: scheduler %q: this model offers %s", ErrParams, c.Scheduler, strings.Join(d.SchedulerNames(), ", "))
		}
	}
	switch {
	case c.FlowShift == 0:
	case d.FlowShift == 0:
		return fmt.Errorf("%w: flow_shift %v: this model is not a flow-matching model", ErrParams, c.FlowShift)
	case !(c.FlowShift > 0) || math.IsInf(c.FlowShift, 0):
		return fmt.Errorf("%w: flow_shift %v: must be a positive number", ErrParams, c.FlowShift)
	}
	return nil
}
