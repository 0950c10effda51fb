package train

import "math"

// LRAt is the learning rate of step k (0-based; the step that makes checkpoint step k+1)
// under o's schedule. With LRFinal == 0 it is o.LR throughout. Otherwise it is o.LR up to
// step LRDecayStart and then follows a half cosine down to LRFinal at step o.Steps, so the
// schedule depends on the step alone and a resumed run picks it up where it stopped. A run
// stopped early (--max-duration, Ctrl-C) has not reached LRFinal.
func LRAt(o Options, k int) float64 {
	if o.LRFinal == 0 || k <= o.LRDecayStart {
		return o.LR
	}
	span := o.Steps - o.LRDecayStart
	if span <= 0 || k >= o.Steps {
		return o.LRFinal
	}
	t := float64(k-o.LRDecayStart) / float64(span)
	return o.LRFinal + (o.LR-o.LRFinal)*0.5*(1+math.Cos(math.Pi*t))
}
