package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/train"
)

// trainReport is what `vdpp train --json FILE` writes (rank 0): the run's step rate and
// where each rank's time went.
type trainReport struct {
	Phase          string            `json:"phase"`
	Ranks          int               `json:"ranks"`
	GOMAXPROCS     int               `json:"gomaxprocs"`
	Batch          int               `json:"batch"`
	MicroBatch     int               `json:"micro_batch"`
	FromStep       int               `json:"from_step"`
	Step           int               `json:"step"`
	WallS          float64           `json:"wall_s"`
	SteadyS        float64           `json:"steady_s"`
	StepsPerS      float64           `json:"steps_per_s"`
	ClipsPerS      float64           `json:"clips_per_s"`
	FirstLoss      float64           `json:"first_loss"`
	LastLoss       float64           `json:"last_loss"`
	FirstHeldOut   *float64          `json:"first_heldout_loss,omitempty"`
	LastHeldOut    *float64          `json:"last_heldout_loss,omitempty"`
	Times          []train.RankTimes `json:"per_rank"`
	CPUSecondsStep float64           `json:"cpu_s_per_step"` // every rank's CPU time over the steps, per step
}

func newTrainReport(res train.Result, o train.Options, gomaxprocs int) trainReport {
	r := trainReport{Phase: res.Phase, Ranks: res.Ranks, GOMAXPROCS: gomaxprocs, Batch: o.Batch, MicroBatch: max(o.MicroBatch, 1),
		FromStep: res.FromStep, Step: res.Step, WallS: res.Wall.Seconds(), SteadyS: res.Steady.Seconds(),
		StepsPerS: res.StepsPerSecond(), FirstLoss: res.FirstLoss, LastLoss: res.LastLoss, Times: res.Times}
	r.ClipsPerS = r.StepsPerS * float64(o.Batch)
	if res.FirstHeldOut == res.FirstHeldOut { // not NaN
		a, b := res.FirstHeldOut, res.LastHeldOut
		r.FirstHeldOut, r.LastHeldOut = &a, &b
	}
	if n := res.Step - res.FromStep; n > 0 {
		for _, t := range res.Times {
			r.CPUSecondsStep += t.CPU / float64(n)
		}
	}
	return r
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, atomicfile.Options{}, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// trainBenchConfig is one way of running the same training in the benchmark.
type trainBenchConfig struct {
	Name       string `json:"name"`
	NProc      int    `json:"nproc"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// trainBenchRun is one run of a configuration.
type trainBenchRun struct {
	Config    string      `json:"config"`
	Round     int         `json:"round"`
	LoadAvg   [2]float64  `json:"loadavg_1m_before_after"`
	Report    trainReport `json:"report"`
	WallTotal float64     `json:"process_wall_s"`
}

// trainBenchSummary is one configuration over the rounds.
type trainBenchSummary struct {
	trainBenchConfig
	StepsPerS     []float64 `json:"steps_per_s"`
	MedianStepsPS float64   `json:"median_steps_per_s"`
	MedianClipsPS float64   `json:"median_clips_per_s"`
	Speedup       float64   `json:"speedup"` // median steps/s over the one-process one-core median
	Efficiency    float64   `json:"efficiency"`
	// RoundSpeedups are each round's steps/s over the same round's one-process one-core
	// run (the runs of a round ran back to back, under about the same load).
	RoundSpeedups  []float64 `json:"round_speedups"`
	MedianRound    float64   `json:"median_round_speedup"`
	CPUSecondsStep float64   `json:"median_cpu_s_per_step"`
	CPUEfficiency  float64   `json:"cpu_efficiency"` // one-process CPU-s per step over this one's (all ranks)
}

// trainBenchReport is `vdpp train --bench --json FILE`.
type trainBenchReport struct {
	Command string              `json:"command"`
	CPU     string              `json:"cpu"`
	Cores   int                 `json:"cores"`
	Rounds  int                 `json:"rounds"`
	Configs []trainBenchSummary `json:"configs"`
	Runs    []trainBenchRun     `json:"runs"`
}

// benchDropFlags are the flags of `vdpp train` the benchmark sets itself for each run.
var benchDropFlags = map[string]bool{"bench": true, "rounds": true, "dir": true, "nproc": true, "json": true, "resume": true,
	"export": true, "export-only": true, "own-sessions": true}

// benchArgs returns args without the flags the benchmark sets (in any of Go's spellings:
// -f, --f, -f=v, -f v).
func benchArgs(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if name == a || a == "--" {
			out = append(out, args[i:]...)
			break
		}
		name, _, hasValue := strings.Cut(name, "=")
		n := 1
		if f := fs.Lookup(name); f != nil && !hasValue && i+1 < len(args) {
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !bf.IsBoolFlag() {
				n = 2 // the value follows
			}
		}
		if !benchDropFlags[name] {
			out = append(out, args[i:i+n]...)
		}
		i += n - 1
	}
	return out
}

// runTrainBench is `vdpp train --bench [--nproc N] [--rounds R] TRAINING FLAGS`: the same
// training (from the same starting checkpoint, which --dir must hold; it is copied for every
// run) run as N processes with one core each (GOMAXPROCS=1), as one process with one core
// and as one process with N cores, the configurations interleaved over R rounds, each run a
// fresh set of processes, every process in a session of its own; it reports the median steady step rate of each, the speedup and
// the efficiency of the N processes over one with one core, the CPU time per step (all
// ranks) and the CPU-time efficiency, which the other load of a shared machine disturbs
// far less than the wall-clock rates, and the 1-minute load average around every run.
func runTrainBench(ctx context.Context, fs *flag.FlagSet, args []string, start string, nproc, rounds int, jsonOut string, stdout, stderr io.Writer) error {
	if nproc < 2 {
		return fmt.Errorf("%w: --bench compares --nproc N >= 2 processes with one", errUsage)
	}
	if rounds < 1 {
		return fmt.Errorf("%w: --rounds %d < 1", errUsage, rounds)
	}
	if _, err := os.Stat(start); err != nil {
		return fmt.Errorf("%w: --bench starts every run from --dir %s (a run folder with the phase's checkpoint, e.g. made by --steps 0): %v", errUsage, start, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	pass := benchArgs(fs, args)
	configs := []trainBenchConfig{
		{Name: "1 process, 1 core", NProc: 1, GOMAXPROCS: 1},
		{Name: fmt.Sprintf("%d processes, 1 core each", nproc), NProc: nproc, GOMAXPROCS: 1},
		{Name: fmt.Sprintf("1 process, %d cores", nproc), NProc: 1, GOMAXPROCS: nproc},
	}
	tmp, err := os.MkdirTemp("", "vdpp-train-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	rep := trainBenchReport{Command: "vdpp train " + strings.Join(args, " "), CPU: cpuModel(), Cores: runtime.NumCPU(), Rounds: rounds}
	for round := range rounds {
		for j := range configs {
			c := configs[(j+round)%len(configs)] // rotate the order from round to round
			dir := filepath.Join(tmp, fmt.Sprintf("r%d-%d", round, c.NProc*10+c.GOMAXPROCS))
			if err := copyTree(start, dir); err != nil {
				return err
			}
			jf := filepath.Join(tmp, "report.json")
			runArgs := append([]string{"train", "--dir", dir, "--resume", "--nproc", strconv.Itoa(c.NProc), "--own-sessions", "--json", jf}, pass...)
			cmd := exec.CommandContext(ctx, exe, runArgs...)
			cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(c.GOMAXPROCS))
			// Every process in a session of its own: Linux's autogroup scheduling shares a
			// busy machine's CPUs between sessions, so processes of one session would share
			// one session's CPU time however many they are.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			before := loadAvg()
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("train bench: %s, round %d: %w\n%s", c.Name, round+1, err, out.String())
			}
			run := trainBenchRun{Config: c.Name, Round: round + 1, WallTotal: time.Since(t0).Seconds(), LoadAvg: [2]float64{before, loadAvg()}}
			data, err := os.ReadFile(jf)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(data, &run.Report); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "train bench: round %d/%d %-26s %.3f steps/s (load %.1f -> %.1f)\n", round+1, rounds, c.Name, run.Report.StepsPerS, run.LoadAvg[0], run.LoadAvg[1])
			rep.Runs = append(rep.Runs, run)
			os.RemoveAll(dir)
		}
	}
	for _, c := range configs {
		s := trainBenchSummary{trainBenchConfig: c}
		var clips, cpu []float64
		for _, r := range rep.Runs {
			if r.Config == c.Name {
				s.StepsPerS = append(s.StepsPerS, r.Report.StepsPerS)
				clips = append(clips, r.Report.ClipsPerS)
				cpu = append(cpu, r.Report.CPUSecondsStep)
			}
		}
		s.MedianStepsPS, s.MedianClipsPS, s.CPUSecondsStep = median(s.StepsPerS), median(clips), median(cpu)
		rep.Configs = append(rep.Configs, s)
	}
	base := rep.Configs[0]
	for i := range rep.Configs {
		c := &rep.Configs[i]
		for r := range rounds {
			if b, v := base.StepsPerS[r], c.StepsPerS[r]; b > 0 {
				c.RoundSpeedups = append(c.RoundSpeedups, v/b)
			}
		}
		c.MedianRound = median(c.RoundSpeedups)
		if base.MedianStepsPS > 0 {
			c.Speedup = c.MedianStepsPS / base.MedianStepsPS
			c.Efficiency = c.Speedup / float64(max(c.NProc, c.GOMAXPROCS))
		}
		if c.CPUSecondsStep > 0 {
			c.CPUEfficiency = base.CPUSecondsStep / c.CPUSecondsStep
		}
	}
	printTrainBench(stdout, rep)
	if jsonOut != "" {
		return writeJSONFile(jsonOut, rep)
	}
	return nil
}

func printTrainBench(w io.Writer, rep trainBenchReport) {
	fmt.Fprintf(w, "%s, %d cores; %d rounds, configurations interleaved, every process in a session of its own\n", rep.CPU, rep.Cores, rep.Rounds)
	fmt.Fprintf(w, "%-28s %-24s %9s %9s %8s %-22s %10s %9s\n", "configuration", "steps/s (each round)", "median", "clips/s", "speedup", "same-round speedups", "cpu_s/step", "cpu_eff")
	for _, c := range rep.Configs {
		fmt.Fprintf(w, "%-28s %-24s %9.3f %9.2f %7.2fx %-22s %10.3f %9.2f\n", c.Name, joinFloats(c.StepsPerS, 3), c.MedianStepsPS, c.MedianClipsPS, c.Speedup,
			joinFloats(c.RoundSpeedups, 2), c.CPUSecondsStep, c.CPUEfficiency)
	}
	for _, r := range rep.Runs {
		if len(r.Report.Times) < 2 {
			continue
		}
		steps := float64(r.Report.Step - r.Report.FromStep)
		fmt.Fprintf(w, "round %d, %s, per step (s):", r.Round, r.Config)
		for _, t := range r.Report.Times {
			fmt.Fprintf(w, "  rank %d compute %.3f all-reduce %.3f wait %.3f apply %.3f", t.Rank, t.Compute/steps, t.AllReduce/steps, t.Wait/steps, t.Apply/steps)
		}
		fmt.Fprintln(w)
	}
	var loads []float64
	for _, r := range rep.Runs {
		loads = append(loads, r.LoadAvg[0], r.LoadAvg[1])
	}
	if len(loads) > 0 {
		fmt.Fprintf(w, "1-minute load average around the runs: %.1f to %.1f (median %.1f)\n", slices.Min(loads), slices.Max(loads), median(loads))
	}
}

func joinFloats(v []float64, prec int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', prec, 64)
	}
	return strings.Join(s, " ")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadAvg is the 1-minute load average (0 where /proc/loadavg is missing).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// cpuModel is the CPU's model name from /proc/cpuinfo ("" where it cannot be read).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(ln, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// copyTree copies the regular files of folder src (recursively) to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
