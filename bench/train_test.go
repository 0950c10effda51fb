package bench

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/train"
)

// Each run of the training benchmark gets the training flags as given, with the run
// folder, the processes and the report the benchmark sets, resuming the copied checkpoint;
// neither the benchmark nor the export again.
func TestTrainRunArgs(t *testing.T) {
	c := train.DefaultCommand()
	c.Steps, c.Batch, c.ConfigsFile, c.Bench, c.Rounds, c.Export, c.ExportOnly, c.NProc = 6, 4, "c.json", true, 2, "out", true, 3
	args := TrainRunArgs(c, TrainConfigs(3)[1], "/tmp/r0", "/tmp/rep.json")
	if args[0] != "train" {
		t.Fatalf("args %q", args)
	}
	got := train.DefaultCommand()
	fs := cli.New("train", nil, nil)
	got.RegisterFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatal(err)
	}
	want := c
	want.Dir, want.Resume, want.NProc, want.OwnSessions, want.JSON = "/tmp/r0", true, 3, true, "/tmp/rep.json"
	want.Bench, want.Export, want.ExportOnly = false, "", false
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("a run parses to\n%+v\nwant\n%+v", got, want)
	}
}

// The summary compares every configuration with the first, by medians and round by round.
func TestSummarizeTrain(t *testing.T) {
	configs := TrainConfigs(2)
	var runs []TrainRun
	for round, rates := range [][3]float64{{1, 1.8, 1.5}, {2, 3.0, 2.0}, {1, 2.0, 1.0}} {
		for i, c := range configs {
			runs = append(runs, TrainRun{Config: c.Name, Round: round + 1, Report: train.Report{StepsPerS: rates[i], ClipsPerS: 4 * rates[i], CPUSecondsStep: 1 / rates[0]}})
		}
	}
	s := summarizeTrain(configs, runs, 3)
	if s[0].Speedup != 1 || s[1].MedianStepsPS != 2 || s[1].Speedup != 2 || s[1].Efficiency != 1 || s[1].MedianClipsPS != 8 ||
		!reflect.DeepEqual(s[1].RoundSpeedups, []float64{1.8, 1.5, 2}) || s[1].MedianRound != 1.8 || s[2].CPUEfficiency != 1 {
		t.Fatalf("summary %+v", s)
	}
	var b bytes.Buffer
	WriteTrainReport(&b, TrainReport{CPU: "cpu", Cores: 2, Rounds: 3, Configs: s, Runs: runs})
	if !strings.Contains(b.String(), "2 processes, 1 core each") || !strings.Contains(b.String(), "2.00x") {
		t.Fatalf("table:\n%s", b.String())
	}
}
