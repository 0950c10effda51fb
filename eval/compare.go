package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// ErrIncomparable is returned by Compare for reports that do not score the same clips.
var ErrIncomparable = errors.New("eval: reports are not comparable")

// Comparison is a paired, clip-by-clip comparison of two reports on the same clips: every
// clip is scored by both, so the difference of the means has a much smaller error than
// either mean (the clip-to-clip spread cancels).
type Comparison struct {
	A, B  Report
	Clips []int // indices scored by both, ascending
	PSNR  PairedDiff
	SSIM  PairedDiff
}

// PairedDiff summarises per-clip differences B − A of one metric.
type PairedDiff struct {
	MeanA, MeanB float64
	Diff         float64 // mean of B − A
	StdErr       float64 // standard error of Diff (sample std of the differences / √n)
	BWins        int     // clips where B scores higher than A
	N            int
}

// Compare pairs a's and b's per-clip scores (Report.Clips) on the clips both scored. The
// reports must come from the same split, rule and dataset seed and share at least two
// clips; they may differ in model, steps, guidance and generation seed, which is what
// one compares.
func Compare(a, b Report) (Comparison, error) {
	switch {
	case len(a.Clips) == 0 || len(b.Clips) == 0:
		return Comparison{}, fmt.Errorf("%w: a report has no per-clip scores (written before they were recorded: run vdpp eval again)", ErrIncomparable)
	case a.Split != b.Split:
		return Comparison{}, fmt.Errorf("%w: split %q vs %q", ErrIncomparable, a.Split, b.Split)
	case a.Rule != b.Rule:
		return Comparison{}, fmt.Errorf("%w: rule %q vs %q", ErrIncomparable, a.Rule, b.Rule)
	case a.DataSeed != b.DataSeed:
		return Comparison{}, fmt.Errorf("%w: dataset seed %d vs %d", ErrIncomparable, a.DataSeed, b.DataSeed)
	}
	byIndex, err := clipsByIndex(a)
	if err != nil {
		return Comparison{}, err
	}
	if _, err := clipsByIndex(b); err != nil {
		return Comparison{}, err
	}
	var idx []int
	var pa, pb, sa, sb []float64
	for _, cb := range b.Clips {
		ca, ok := byIndex[cb.Index]
		if !ok {
			continue
		}
		idx = append(idx, cb.Index)
		pa, pb = append(pa, ca.PSNRAfterFirst), append(pb, cb.PSNRAfterFirst)
		sa, sb = append(sa, ca.SSIMAfterFirst), append(sb, cb.SSIMAfterFirst)
	}
	if len(idx) < 2 {
		return Comparison{}, fmt.Errorf("%w: %d clips scored by both (need 2)", ErrIncomparable, len(idx))
	}
	slices.Sort(idx)
	return Comparison{A: a, B: b, Clips: idx, PSNR: paired(pa, pb), SSIM: paired(sa, sb)}, nil
}

// clipsByIndex maps r's clips by index; a clip scored twice makes the pairing ambiguous.
func clipsByIndex(r Report) (map[int]ClipScore, error) {
	m := make(map[int]ClipScore, len(r.Clips))
	for _, c := range r.Clips {
		if _, dup := m[c.Index]; dup {
			return nil, fmt.Errorf("%w: %s scores clip %d twice", ErrIncomparable, r.Model, c.Index)
		}
		m[c.Index] = c
	}
	return m, nil
}

// paired summarises the differences b[i] − a[i] of one metric on the same clips.
func paired(a, b []float64) PairedDiff {
	n := len(a)
	d := make([]float64, n)
	for i := range d {
		d[i] = b[i] - a[i]
	}
	m := mean(d)
	var ss float64
	wins := 0
	for i, x := range d {
		ss += (x - m) * (x - m)
		if b[i] > a[i] {
			wins++
		}
	}
	return PairedDiff{MeanA: mean(a), MeanB: mean(b), Diff: m, StdErr: math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n)), BWins: wins, N: n}
}

// SettingDiffs lists the sampling settings in which the two reports differ (steps,
// guidance, generation seed, decode chunk, frames), each as "name A vs B". A comparison
// of two models is clean only when it is empty: otherwise B − A mixes the models with
// these settings.
func (c Comparison) SettingDiffs() []string {
	var d []string
	add := func(name, a, b string) {
		if a != b {
			d = append(d, fmt.Sprintf("%s %s vs %s", name, a, b))
		}
	}
	a, b := c.A, c.B
	add("steps", fmt.Sprint(a.Steps), fmt.Sprint(b.Steps))
	add("guidance", fmt.Sprintf("%g-%g", a.MinGuidance, a.MaxGuidance), fmt.Sprintf("%g-%g", b.MinGuidance, b.MaxGuidance))
	add("seed", fmt.Sprint(a.Seed), fmt.Sprint(b.Seed))
	add("decode chunk", chunkText(a.DecodeChunk), chunkText(b.DecodeChunk))
	add("frames", fmt.Sprint(a.Frames), fmt.Sprint(b.Frames))
	return d
}

// chunkText names a decode chunk size (0: all frames at once).
func chunkText(n int) string {
	if n > 0 {
		return fmt.Sprintf("%d-frame chunks", n)
	}
	return "all frames"
}

// Write prints the comparison as a small table, after a warning line when the reports
// differ in model and also in sampling settings (SettingDiffs).
func (c Comparison) Write(w io.Writer) error {
	setting := func(r Report) string {
		return fmt.Sprintf("%s, %d steps, guidance %g-%g, seed %d, decoded in %s", r.Model, r.Steps, r.MinGuidance, r.MaxGuidance, r.Seed, chunkText(r.DecodeChunk))
	}
	if diffs := c.SettingDiffs(); c.A.Model != c.B.Model && len(diffs) > 0 {
		if _, err := fmt.Fprintf(w, "warning: the reports differ in model and in %s; B-A measures both (run vdpp eval on one with the other's settings to compare the models alone)\n",
			strings.Join(diffs, ", ")); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "A: %s\nB: %s\n%d %s clips (%s rule, dataset seed %d), frames 2..N\n\n"+
		"metric   A        B        B-A      stderr   B better on\n"+
		"PSNR dB  %-8.3f %-8.3f %-+8.3f %-8.3f %d/%d\n"+
		"SSIM     %-8.4f %-8.4f %-+8.4f %-8.4f %d/%d\n",
		setting(c.A), setting(c.B), len(c.Clips), c.A.Split, c.A.Rule, c.A.DataSeed,
		c.PSNR.MeanA, c.PSNR.MeanB, c.PSNR.Diff, c.PSNR.StdErr, c.PSNR.BWins, c.PSNR.N,
		c.SSIM.MeanA, c.SSIM.MeanB, c.SSIM.Diff, c.SSIM.StdErr, c.SSIM.BWins, c.SSIM.N)
	return err
}

// ReadReport reads a report written by Report.WriteJSON.
func ReadReport(path string) (Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Report{}, fmt.Errorf("eval: %w", err)
	}
	return ParseReport(b)
}

// ParseReport decodes a JSON report.
func ParseReport(b []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("eval: report: %w", err)
	}
	return r, nil
}
