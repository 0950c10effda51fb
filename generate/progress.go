package generate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/internal/progress"
	"github.com/vdpp/vdpp/pipeline"
)

// rankProgress writes one rank's progress report (progress.Rank) to
// --progress-dir/rank-N.json, for the launching process's display: at once when the rank's
// phase changes, at most every writeEvery while it computes steps (a step inside that time
// is written when it ends). A nil rankProgress (no --progress-dir: a rank started by
// another launcher) does nothing.
type rankProgress struct {
	path string
	// counts says this rank's steps count toward the run's total (one rank per pipeline
	// stage of each replica does; its cfg and cp partners compute the same steps).
	counts bool

	mu      sync.Mutex
	r       progress.Rank
	last    time.Time
	pending bool // a write is scheduled
}

// writeEvery bounds how often a computing rank rewrites its report.
const writeEvery = 100 * time.Millisecond

func newRankProgress(dir string, rank, stage int, counts bool) *rankProgress {
	if dir == "" {
		return nil
	}
	p := &rankProgress{path: filepath.Join(dir, fmt.Sprintf("rank-%d.json", rank)), counts: counts,
		r: progress.Rank{Rank: rank, Stage: stage, Phase: progress.Loading, Sample: -1}}
	p.write()
	return p
}

// phase records what the rank does now (sample -1: none) and writes the report.
func (p *rankProgress) phase(ph progress.Phase, sample int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.r.Phase, p.r.Sample = ph, sample
	p.writeLocked()
}

// event records a pipeline event: a denoising call's steps; a hand-off to the next stage
// leaves the rank waiting for its next item.
func (p *rankProgress) event(e pipeline.Event) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Kind == "send" {
		p.r.Phase, p.r.Sample = progress.Waiting, -1
		p.writeLocked()
		return
	}
	if e.Kind != "compute" || len(e.Samples) == 0 {
		return
	}
	if p.counts {
		p.r.Steps += int64(e.Step1-e.Step0) * int64(len(e.Samples))
	}
	p.r.Phase, p.r.Sample, p.r.Step0, p.r.Step1 = progress.Denoising, e.Samples[0], e.Step0, e.Step1
	switch since := time.Since(p.last); {
	case since >= writeEvery:
		p.writeLocked()
	case !p.pending:
		p.pending = true
		time.AfterFunc(writeEvery-since, p.write)
	}
}

// decoded records a sample written.
func (p *rankProgress) decoded() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.r.Decoded++
	p.r.Phase, p.r.Sample = progress.Waiting, -1
	p.writeLocked()
}

func (p *rankProgress) write() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = false
	p.writeLocked()
}

// writeLocked writes the report; a failure only costs the display, so it is dropped.
func (p *rankProgress) writeLocked() {
	b, err := json.Marshal(p.r)
	if err == nil {
		_ = atomicfile.WriteFile(p.path, b, atomicfile.Options{})
	}
	p.last = time.Now()
}

// readRanks reads every rank's latest report in dir (a report being replaced or not yet
// written is left out until the next read).
func readRanks(dir string) []progress.Rank {
	paths, _ := filepath.Glob(filepath.Join(dir, "rank-*.json"))
	out := make([]progress.Rank, 0, len(paths))
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var r progress.Rank
		if json.Unmarshal(b, &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// display draws the run's progress from the ranks' reports in dir until done is closed:
// a bar redrawn in place on a terminal, else a plain line every plainEvery and whenever a
// sample is written; nothing with --quiet. It ends with a last line.
func (r *Runner) display(o Options, dir string, done <-chan struct{}) {
	w := r.Progress
	if w == nil || o.Quiet {
		return
	}
	bar := r.bar(o)
	every := r.PlainEvery
	if every <= 0 {
		every = 10 * time.Second
	}
	tr := &progress.Tracker{Total: int64(o.NumSamples) * int64(o.Steps), Samples: o.NumSamples}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var lastLine string
	var lastPlain time.Time
	lastSamples, lastDone := -1, int64(-1)
	for final := false; ; {
		s := tr.Observe(time.Now(), readRanks(dir))
		switch {
		case bar:
			if line := s.Bar(r.Width); line != lastLine {
				fmt.Fprintf(w, "\r%s\x1b[K", line)
				lastLine = line
			}
		case final && s.Samples == lastSamples && s.Done == lastDone:
			// the last line already says where the run ended
		case final || s.Samples != lastSamples || time.Since(lastPlain) >= every:
			fmt.Fprintf(w, "generate: %s\n", s.Plain())
			lastPlain, lastSamples, lastDone = time.Now(), s.Samples, s.Done
		}
		if final {
			if bar {
				fmt.Fprintln(w)
			}
			return
		}
		select {
		case <-done:
			final = true // one last read, then stop
		case <-tick.C:
		}
	}
}

// progressDir makes the folder the ranks report into; remove it with os.RemoveAll.
func progressDir() (string, error) {
	dir, err := os.MkdirTemp("", "vdpp-progress-")
	if err != nil {
		return "", fmt.Errorf("generate: progress folder: %w", err)
	}
	return dir, nil
}
