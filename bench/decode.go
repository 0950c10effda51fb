package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// DecodeWorkload is NoiseWorkload with the model's VAE decode as each sample's finishing
// work (`vdpp bench --decode-ranks N`): a sample completes when its frames are decoded.
// It is a pipeline.PartWorkload, so the decode parts (the family's decode chunks) can be
// spread over ranks; the frames are dropped, the final latents recorded as without decoding.
type DecodeWorkload struct {
	*NoiseWorkload
	Sampler family.Sampler
	Params  family.Params
	// OnEvent, when set, receives a "decode" event per part Finish decodes (the spread
	// path's parts are on the pipeline's timeline already).
	OnEvent func(pipeline.Event)
}

// newDecodeWorkload wraps w with the decoder of s for latents of o's shape.
func newDecodeWorkload(o Options, m family.Resolved, s family.Sampler, w *NoiseWorkload) (*DecodeWorkload, error) {
	p := s.DefaultParams()
	def := s.LatentShape(p)
	if len(def) != 4 || def[2] < 1 || def[3] < 1 {
		return nil, fmt.Errorf("bench: --decode-ranks: %s has no decoder latent shape", s.Family())
	}
	desc, err := m.Describe()
	if err != nil {
		return nil, err
	}
	p.NumFrames = o.LatentFrames
	if fm := desc.FrameMultiple; fm > 0 {
		p.NumFrames = (o.LatentFrames-1)*fm + 1
	}
	p.Height, p.Width = o.LatentHeight*(p.Height/def[2]), o.LatentWidth*(p.Width/def[3])
	if o.DecodeChunkSize >= 0 {
		p.DecodeChunkSize = o.DecodeChunkSize
	}
	if got := s.LatentShape(p); !slices.Equal(got, o.LatentShape()) {
		return nil, fmt.Errorf("bench: --decode-ranks: the latent %v is not the model's %v for %d frames of %dx%d", o.LatentShape(), got, p.NumFrames, p.Width, p.Height)
	}
	return &DecodeWorkload{NoiseWorkload: w, Sampler: s, Params: p}, nil
}

// Parts implements pipeline.PartWorkload.
func (w *DecodeWorkload) Parts() int { return family.DecodeParts(w.Sampler, w.Params) }

// FinishPart implements pipeline.PartWorkload: one decode part.
func (w *DecodeWorkload) FinishPart(ctx context.Context, _ int64, lat *tensor.Dense, part int) (*tensor.Dense, error) {
	return family.DecodePart(ctx, w.Sampler, lat, w.Params, part)
}

// JoinParts implements pipeline.PartWorkload: the sample is complete.
func (w *DecodeWorkload) JoinParts(_ context.Context, sample int64, lat *tensor.Dense, parts []*tensor.Dense) error {
	if _, err := family.JoinParts(parts); err != nil {
		return err
	}
	w.record(sample, lat)
	return nil
}

// Finish implements pipeline.Workload: every part of every sample here, then the item is
// complete.
func (w *DecodeWorkload) Finish(ctx context.Context, it *pipeline.Item) error {
	per := it.Latent.Len() / len(it.Samples)
	for r, s := range it.Samples {
		lat := &tensor.Dense{Shape: it.Latent.Shape[1:], Data: it.Latent.Data[r*per : (r+1)*per]}
		for part := range w.Parts() {
			t0 := time.Now()
			if _, err := w.FinishPart(ctx, s, lat, part); err != nil {
				return fmt.Errorf("bench: sample %d: decode part %d: %w", s, part, err)
			}
			if w.OnEvent != nil {
				w.OnEvent(pipeline.Event{Kind: KindDecode, Group: it.Group, Samples: []int64{s}, Step0: part, Step1: part + 1, Start: t0, End: time.Now()})
			}
		}
	}
	return w.NoiseWorkload.Finish(ctx, it)
}
