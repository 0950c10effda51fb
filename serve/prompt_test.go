package serve

import (
	"context"
	"fmt"
	"image"
	"testing"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/serve/dispatch"
	"github.com/vdpp/vdpp/serve/job"
)

// textSynthetic is the synthetic model posing as a text-to-video model: a prompt of n
// bytes conditions as an image of n+1 pixels.
type textSynthetic struct{ *Model }

func (textSynthetic) TextConditioned() bool { return true }
func (g textSynthetic) Prepare(ctx context.Context, in family.Input, p job.Params, sc sched.Scheduler) (*dispatch.Sample, error) {
	if in.Prompt == nil || in.Image != nil {
		return nil, fmt.Errorf("%w: a text model takes a prompt only", job.ErrBadParams)
	}
	in.Image, in.Prompt = image.NewGray(image.Rect(0, 0, len(in.Prompt.Text)+1, 1)), nil
	return g.Model.Prepare(ctx, in, p, sc)
}

// The served model's limits say what a job gives it (the web page shows the fields that
// fit): a prompt for a text-to-video model, an image otherwise.
func TestModelLimitsInput(t *testing.T) {
	for gen, want := range map[generator]string{textSynthetic{syntheticModel(t)}: job.InputText, syntheticModel(t): job.InputImage} {
		s := &Server{gen: gen, cfg: Config{Limits: job.DefaultLimits()}}
		if got := s.modelLimits().Input; got != want {
			t.Errorf("%T: input %q, want %q", gen, got, want)
		}
	}
}
