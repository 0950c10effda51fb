package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// WriteMarkdown writes r as a Markdown section: a heading, a configuration line, a results
// table (first-sample latency, steady ms per sample, throughput, each next to the
// baseline's; speedup, efficiency, equality with the baseline, wall time) and a per-rank
// table (stage [start, end), busy %, compute / comm / wait ms). Missing numbers print as
// "—". The output is deterministic.
func WriteMarkdown(w io.Writer, r Report) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }

	p("## vdpp bench: %s\n\n", mdEscape(orDash(r.Model)))
	p("**Configuration:** %s\n\n", configLine(r))
	if r.Command != "" {
		p("Command: `%s`\n\n", strings.ReplaceAll(r.Command, "`", "'"))
	}

	base := func(v float64) string {
		if !r.HasBaseline() {
			return "—"
		}
		return fmtNum(v)
	}
	p("| metric | vdpp (%s) | baseline (1 process) |\n", plural(r.NProc, "process", "processes"))
	p("|:---|---:|---:|\n")
	p("| first sample (ms) | %s | %s |\n", fmtNum(r.FirstSampleMS), base(r.BaselineFirstSampleMS))
	p("| steady (ms / sample) | %s | %s |\n", fmtNum(r.SteadySampleMS), base(r.BaselineSteadySampleMS))
	p("| throughput (samples / s) | %s | %s |\n", fmtNum(r.ThroughputSamplesPerS), base(r.BaselineThroughputSamplesPerS))
	speedup, eff := "—", "—"
	if r.HasBaseline() && r.Speedup > 0 {
		speedup = strconv.FormatFloat(r.Speedup, 'f', 2, 64) + "×"
		eff = fmtPct(r.Efficiency)
	}
	p("| speedup (baseline steady / steady) | %s | |\n", speedup)
	p("| efficiency (speedup / processes) | %s | |\n", eff)
	p("| equal to baseline | %s | |\n", equalText(r.EqualToBaseline))
	if r.MaxRelL2VsBaseline != nil {
		p("| max rel. L2 vs baseline | %s | |\n", strconv.FormatFloat(*r.MaxRelL2VsBaseline, 'g', 3, 64))
	}
	p("| wall (ms) | %s | |\n", fmtNum(r.WallMS))
	if r.Cache != "" {
		p("\n### Step cache: %s\n\n", mdEscape(r.Cache))
		p("| metric | cached | uncached (same mesh) |\n")
		p("|:---|---:|---:|\n")
		p("| first sample (ms) | %s | %s |\n", fmtNum(r.FirstSampleMS), fmtNum(r.UncachedFirstSampleMS))
		p("| steady (ms / sample) | %s | %s |\n", fmtNum(r.SteadySampleMS), fmtNum(r.UncachedSteadySampleMS))
		p("| throughput (samples / s) | %s | %s |\n", fmtNum(r.ThroughputSamplesPerS), fmtNum(r.UncachedThroughputSamplesPerS))
		p("| denoiser calls computed | %d of %d | %d |\n", r.ComputedCalls, r.TotalCalls, r.TotalCalls)
		p("| speedup (uncached / cached steady) | %s | |\n", strconv.FormatFloat(r.CacheSpeedup, 'f', 2, 64)+"×")
		p("| speedup (uncached / cached first sample) | %s | |\n", strconv.FormatFloat(r.CacheFirstSampleSpeedup, 'f', 2, 64)+"×")
		if r.MaxRelL2VsUncached != nil {
			p("| max rel. L2 vs uncached | %s | |\n", strconv.FormatFloat(*r.MaxRelL2VsUncached, 'g', 3, 64))
		}
		if r.CacheLine != "" {
			p("\n%s\n", mdEscape(r.CacheLine))
		}
	}

	nrows := len(r.StageSteps)
	for _, pr := range r.PerRank {
		nrows = max(nrows, pr.Rank+1)
	}
	if nrows > 0 {
		byRank := make(map[int]RankStats, len(r.PerRank))
		for _, pr := range r.PerRank {
			byRank[pr.Rank] = pr
		}
		p("\n### Per rank\n\n")
		p("| rank | steps [start, end) | busy | compute (ms) | comm (ms) | wait (ms) |\n")
		p("|---:|:---|---:|---:|---:|---:|\n")
		for rank := range nrows {
			stage := "—"
			if rank < len(r.StageSteps) {
				s := r.StageSteps[rank]
				stage = fmt.Sprintf("[%d, %d)", s[0], s[1])
			}
			pr, ok := byRank[rank]
			if !ok {
				p("| %d | %s | — | — | — | — |\n", rank, stage)
				continue
			}
			p("| %d | %s | %s | %s | %s | %s |\n", rank, stage, fmtPct(pr.BusyFraction),
				fmtNum(pr.ComputeMS), fmtNum(pr.CommMS), fmtNum(pr.WaitMS))
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("bench: write markdown: %w", err)
	}
	return nil
}

// configLine is the one-line description of the run's configuration.
func configLine(r Report) string {
	var parts []string
	procs := plural(r.NProc, "process", "processes")
	var mesh []string
	for _, d := range []struct {
		name string
		v    int
	}{{"pp", r.PP}, {"cfg", r.CFG}, {"cp", r.CP}, {"dp", r.DP}} {
		if d.v > 0 {
			mesh = append(mesh, fmt.Sprintf("%s %d", d.name, d.v))
		}
	}
	if len(mesh) > 0 {
		procs += " (" + strings.Join(mesh, " · ") + ")"
	}
	parts = append(parts, procs)
	steps := plural(r.TotalSteps, "step", "steps")
	if r.StepMS > 0 {
		steps += fmt.Sprintf(" (%s ms / step)", fmtNum(r.StepMS))
	}
	parts = append(parts, steps)
	parts = append(parts, fmt.Sprintf("%s, %d warm-up", plural(r.NumSamples, "sample", "samples"), r.WarmupSamples))
	if r.MicroBatch > 0 {
		parts = append(parts, fmt.Sprintf("micro-batch %d", r.MicroBatch))
	}
	if len(r.LatentShape) > 0 {
		dims := make([]string, len(r.LatentShape))
		for i, d := range r.LatentShape {
			dims[i] = strconv.Itoa(d)
		}
		parts = append(parts, "latent ["+strings.Join(dims, "×")+"]")
	}
	if h := r.Host; h.GOOS != "" {
		parts = append(parts, fmt.Sprintf("host %s/%s, %s, %s", h.GOOS, h.GOARCH, plural(h.NumCPU, "CPU", "CPUs"), h.GoVersion))
	}
	return mdEscape(strings.Join(parts, " · "))
}

func equalText(b *bool) string {
	switch {
	case b == nil:
		return "not checked"
	case *b:
		return "yes (bit-identical)"
	default:
		return "**no**"
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// mdEscape makes s safe inside a Markdown table cell or line.
func mdEscape(s string) string {
	r := strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}

// fmtNum formats a non-negative measurement with precision that suits its size:
// 1234.5, 12.34, 0.123. Non-finite values print as "—".
func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a >= 0.001:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

// fmtPct formats a fraction as a percentage with one decimal.
func fmtPct(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + " %"
}
