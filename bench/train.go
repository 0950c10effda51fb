package bench

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/train"
)

// TrainConfig is one way of running the same training in the training benchmark.
type TrainConfig struct {
	Name       string `json:"name"`
	NProc      int    `json:"nproc"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// TrainRun is one run of a configuration.
type TrainRun struct {
	Config    string       `json:"config"`
	Round     int          `json:"round"`
	LoadAvg   [2]float64   `json:"loadavg_1m_before_after"`
	Report    train.Report `json:"report"`
	WallTotal float64      `json:"process_wall_s"`
}

// TrainSummary is one configuration over the rounds.
type TrainSummary struct {
	TrainConfig
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

// TrainReport is the training benchmark's report (`vdpp train --bench --json FILE`).
type TrainReport struct {
	Command string         `json:"command"`
	CPU     string         `json:"cpu"`
	Cores   int            `json:"cores"`
	Rounds  int            `json:"rounds"`
	Configs []TrainSummary `json:"configs"`
	Runs    []TrainRun     `json:"runs"`
}

// TrainConfigs are the benchmark's configurations for nproc processes: one process of one
// core (the baseline), nproc processes of one core each, one process of nproc cores.
func TrainConfigs(nproc int) []TrainConfig {
	return []TrainConfig{
		{Name: "1 process, 1 core", NProc: 1, GOMAXPROCS: 1},
		{Name: fmt.Sprintf("%d processes, 1 core each", nproc), NProc: nproc, GOMAXPROCS: 1},
		{Name: fmt.Sprintf("1 process, %d cores", nproc), NProc: 1, GOMAXPROCS: nproc},
	}
}

// TrainRunArgs are the arguments of executable's `vdpp train` for one run of config in
// run folder dir, reporting to report: c's training flags (rendered from its flag set)
// with the folder, the processes and the report the benchmark sets, resuming the copied
// checkpoint, each process in a session of its own; no benchmark, no export.
func TrainRunArgs(c train.Command, config TrainConfig, dir, report string) []string {
	c.Dir, c.Resume, c.NProc, c.OwnSessions, c.JSON = dir, true, config.NProc, true, report
	c.Bench, c.Export, c.ExportOnly = false, "", false
	return append([]string{"train"}, c.Args()...)
}

// Train is `vdpp train --bench [--nproc N] [--rounds R] TRAINING FLAGS`: the same training
// as c (from the same starting checkpoint, which c.Dir must hold; it is copied for every
// run) run as N = c.NProc processes with one core each (GOMAXPROCS=1), as one process with
// one core and as one process with N cores, the configurations interleaved over c.Rounds
// rounds, each run a fresh set of processes of exe, every process in a session of its own.
// It reports the median steady step rate of each, the speedup and the efficiency of the N
// processes over one with one core, the CPU time per step (all ranks) and the CPU-time
// efficiency, which the other load of a shared machine disturbs far less than the
// wall-clock rates, and the 1-minute load average around every run; command is the
// command line the report records. Progress goes to progress.
func Train(ctx context.Context, exe string, c train.Command, command string, progress io.Writer) (TrainReport, error) {
	nproc, rounds := c.NProc, c.Rounds
	if nproc < 2 {
		return TrainReport{}, cli.Errorf(ErrOptions, "--bench compares --nproc N >= 2 processes with one")
	}
	if rounds < 1 {
		return TrainReport{}, cli.Errorf(ErrOptions, "--rounds %d < 1", rounds)
	}
	start := c.Dir
	if _, err := os.Stat(start); err != nil {
		return TrainReport{}, cli.Errorf(ErrOptions, "--bench starts every run from --dir %s (a run folder with the phase's checkpoint, e.g. made by --steps 0): %v", start, err)
	}
	configs := TrainConfigs(nproc)
	tmp, err := os.MkdirTemp("", "vdpp-train-bench-")
	if err != nil {
		return TrainReport{}, err
	}
	defer os.RemoveAll(tmp)
	rep := TrainReport{Command: command, CPU: cpuModel(), Cores: runtime.NumCPU(), Rounds: rounds}
	for round := range rounds {
		for j := range configs {
			cfg := configs[(j+round)%len(configs)] // rotate the order from round to round
			dir := filepath.Join(tmp, fmt.Sprintf("r%d-%d", round, cfg.NProc*10+cfg.GOMAXPROCS))
			if err := CopyTree(start, dir); err != nil {
				return rep, err
			}
			jf := filepath.Join(tmp, "report.json")
			cmd := exec.CommandContext(ctx, exe, TrainRunArgs(c, cfg, dir, jf)...)
			cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(cfg.GOMAXPROCS))
			// Every process in a session of its own: Linux's autogroup scheduling shares a
			// busy machine's CPUs between sessions, so processes of one session would share
			// one session's CPU time however many they are.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			before := loadAvg()
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				return rep, fmt.Errorf("train bench: %s, round %d: %w\n%s", cfg.Name, round+1, err, out.String())
			}
			run := TrainRun{Config: cfg.Name, Round: round + 1, WallTotal: time.Since(t0).Seconds(), LoadAvg: [2]float64{before, loadAvg()}}
			data, err := os.ReadFile(jf)
			if err != nil {
				return rep, err
			}
			if err := json.Unmarshal(data, &run.Report); err != nil {
				return rep, err
			}
			fmt.Fprintf(progress, "train bench: round %d/%d %-26s %.3f steps/s (load %.1f -> %.1f)\n", round+1, rounds, cfg.Name, run.Report.StepsPerS, run.LoadAvg[0], run.LoadAvg[1])
			rep.Runs = append(rep.Runs, run)
			os.RemoveAll(dir)
		}
	}
	rep.Configs = summarizeTrain(configs, rep.Runs, rounds)
	return rep, nil
}

// summarizeTrain summarizes the runs of each configuration against the first (the
// baseline): medians, speedups (of the medians and round by round) and CPU efficiency.
func summarizeTrain(configs []TrainConfig, runs []TrainRun, rounds int) []TrainSummary {
	var out []TrainSummary
	for _, c := range configs {
		s := TrainSummary{TrainConfig: c}
		var clips, cpu []float64
		for _, r := range runs {
			if r.Config == c.Name {
				s.StepsPerS = append(s.StepsPerS, r.Report.StepsPerS)
				clips = append(clips, r.Report.ClipsPerS)
				cpu = append(cpu, r.Report.CPUSecondsStep)
			}
		}
		s.MedianStepsPS, s.MedianClipsPS, s.CPUSecondsStep = median(s.StepsPerS), median(clips), median(cpu)
		out = append(out, s)
	}
	base := out[0]
	for i := range out {
		c := &out[i]
		for r := range min(rounds, len(base.StepsPerS), len(c.StepsPerS)) {
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
	return out
}

// WriteTrainReport writes the training benchmark's table: each configuration's step rates,
// speedups and CPU efficiency, where each rank's time went, and the load around the runs.
func WriteTrainReport(w io.Writer, rep TrainReport) {
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

// CopyTree copies the regular files of folder src (recursively) to dst.
func CopyTree(src, dst string) error {
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
