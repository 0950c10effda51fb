package progress

import (
	"strings"
	"testing"
	"time"
)

func TestTrackerRateAndETA(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := &Tracker{Total: 100, Samples: 4, Window: 10 * time.Second}
	at := func(sec float64, ranks ...Rank) Snapshot {
		return tr.Observe(t0.Add(time.Duration(sec*float64(time.Second))), ranks)
	}
	// Loading: no steps, no rate, no ETA.
	s := at(0, Rank{Rank: 0, Phase: Loading}, Rank{Rank: 1, Phase: Loading})
	if s.Done != 0 || s.Rate != 0 || s.ETA >= 0 {
		t.Fatalf("loading: %+v", s)
	}
	s = at(5, Rank{Rank: 0, Phase: Loading}, Rank{Rank: 1, Phase: Loading})
	// Steps from t=5 at 2 steps/s: the loading time does not dilute the rate.
	s = at(10, Rank{Rank: 0, Phase: Denoising, Steps: 6}, Rank{Rank: 1, Phase: Denoising, Steps: 4})
	if s.Done != 10 || s.Rate != 2 || s.ETA != 45*time.Second {
		t.Fatalf("after 10 steps in 5 s: done %d rate %v eta %v", s.Done, s.Rate, s.ETA)
	}
	// A lagging report never takes progress back.
	s = at(11, Rank{Rank: 0, Steps: 3}, Rank{Rank: 1, Steps: 4})
	if s.Done != 10 {
		t.Fatalf("done went back to %d", s.Done)
	}
	// The rate follows the last window: 4 steps/s from t=20 to t=30.
	at(20, Rank{Steps: 30})
	s = at(30, Rank{Steps: 70, Decoded: 2})
	if s.Rate != 4 || s.ETA != 7500*time.Millisecond || s.Samples != 2 {
		t.Fatalf("window rate %v eta %v samples %d", s.Rate, s.ETA, s.Samples)
	}
	s = at(40, Rank{Steps: 100, Decoded: 4})
	if s.ETA != 0 || s.Done != 100 || s.Elapsed != 40*time.Second {
		t.Fatalf("finished: %+v", s)
	}
}

func TestLines(t *testing.T) {
	s := Snapshot{Done: 42, Total: 100, Samples: 2, OfSamples: 4, Rate: 3.1, ETA: 19 * time.Second, Elapsed: 14 * time.Second,
		Ranks: []Rank{{Rank: 0, Phase: Denoising, Sample: 3, Step0: 12, Step1: 13}, {Rank: 1, Phase: Decoding, Sample: 1}, {Rank: 2}}}
	bar := s.Bar(0)
	if want := "[========            ] 42/100 steps  2/4 samples  3.1 steps/s  ETA 0:19  elapsed 0:14 | r0 s3 step 12-13 · r1 decode s1 · r2 waiting"; bar != want {
		t.Errorf("Bar:\n got %q\nwant %q", bar, want)
	}
	if got := s.Bar(60); len(got) > 100 || !strings.HasPrefix(got, "[========") {
		t.Errorf("Bar(60) = %q", got)
	}
	plain := s.Plain()
	if want := "42/100 steps, 2/4 samples, 3.1 steps/s, ETA 0:19, elapsed 0:14; rank 0: sample 3 steps 12-13, rank 1: decoding sample 1, rank 2: waiting"; plain != want {
		t.Errorf("Plain:\n got %q\nwant %q", plain, want)
	}
	slow := Snapshot{Total: 10, Rate: 0.25, ETA: -1}
	if p := slow.Plain(); !strings.Contains(p, "4 s/step") || !strings.Contains(p, "ETA --") {
		t.Errorf("slow: %q", p)
	}
}

func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0:00", 59499 * time.Millisecond: "0:59", 61 * time.Second: "1:01", 3723 * time.Second: "1:02:03"} {
		if got := Clock(d); got != want {
			t.Errorf("Clock(%v) = %q, want %q", d, got, want)
		}
	}
}

// While no step is taken (the last stage decoding), the rate holds and the ETA counts down.
func TestRateHoldsWhileNoStepIsTaken(t *testing.T) {
	t0 := time.Unix(0, 0)
	tr := &Tracker{Total: 20, Samples: 2}
	tr.Observe(t0, []Rank{{Steps: 0}})
	s1 := tr.Observe(t0.Add(5*time.Second), []Rank{{Steps: 10}})
	s2 := tr.Observe(t0.Add(8*time.Second), []Rank{{Steps: 10, Phase: Decoding}})
	if s1.Rate != 2 || s2.Rate != 2 || s1.ETA != 5*time.Second || s2.ETA != 2*time.Second {
		t.Fatalf("rate %v then %v, ETA %v then %v", s1.Rate, s2.Rate, s1.ETA, s2.ETA)
	}
	if got := tr.Observe(t0.Add(9*time.Second), []Rank{{Steps: 20, Decoded: 1}}).Plain(); !strings.Contains(got, "decoding") {
		t.Fatalf("all steps done, a sample left: %q", got)
	}
	if got := tr.Observe(t0.Add(10*time.Second), []Rank{{Steps: 20, Decoded: 2}}).Plain(); !strings.Contains(got, "done") {
		t.Fatalf("finished: %q", got)
	}
}
