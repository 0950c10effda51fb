package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/generate"
)

// `vdpp plan` and `vdpp generate --plan auto` plan one workload for the same flags: the
// model's defaults (the built-in model's guidance 2 -> 4: a guided run) and one sample
// unless asked; the generate command plan prints runs the planned job (report.json has its
// sizes, steps, guidance and mesh).
func TestPlanAndPlanAutoShareTheWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in model")
	}
	job := []string{"--model", "builtin", "--steps", "3", "--num-frames", "4"}
	var stdout, stderr bytes.Buffer
	if err := runPlan(context.Background(), append(append([]string{}, job...), "--devices", "2", "--measure-processes=false"), &stdout, &stderr); err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	table := stdout.String()
	m := regexp.MustCompile(`\*\*Workload:\*\* (.*), memory per device`).FindStringSubmatch(table)
	if m == nil || !strings.Contains(m[1], "1 samples x 3 steps") || !strings.Contains(m[1], "guided true") {
		t.Fatalf("plan's workload: %q\n%s", m, table)
	}
	// The rest runs the binary: beside the other tests that do (runPlan above ran in the
	// test process, serially).
	t.Parallel()
	img := testImage(t)
	cmd := exec.Command(vdpp(t), append(append([]string{"generate"}, job...), "--image", img, "--plan", "auto", "--nproc", "2", "--out", filepath.Join(t.TempDir(), "auto"))...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "generate: --plan auto: workload "+m[1]+"\n") {
		t.Fatalf("generate --plan auto: %v; want the workload %q:\n%s", err, m[1], out)
	}
	// The printed generate command runs the planned job.
	gen := regexp.MustCompile(`(?m)^  vdpp generate (.*)$`).FindStringSubmatch(table)
	mesh := regexp.MustCompile(`run the best mesh \(pp=(\d) cfg=(\d) cp=(\d) dp=(\d)\)`).FindStringSubmatch(table)
	if gen == nil || mesh == nil || !strings.Contains(gen[1], "--min-guidance 2 --max-guidance 4") {
		t.Fatalf("no generate command with the model's guidance:\n%s", table)
	}
	dir := runGenerateBin(t, strings.Fields(strings.Replace(gen[1], "IMAGE.png", img, 1))...)
	var rep generate.SampleReport
	b, err := os.ReadFile(filepath.Join(dir, "sample-000", "report.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rep.PP, rep.CFG, rep.CP, rep.DP); got != strings.Join(mesh[1:], " ") || rep.Steps != 3 || rep.Frames != 4 ||
		rep.MinGuidance != 2 || rep.MaxGuidance != 4 || rep.Height != 64 || rep.Width != 64 {
		t.Fatalf("the printed command ran mesh %s, %d steps, %d frames %dx%d, guidance %v -> %v; planned %v, 3 steps, 4 frames 64x64, 2 -> 4",
			got, rep.Steps, rep.Frames, rep.Width, rep.Height, rep.MinGuidance, rep.MaxGuidance, mesh[1:])
	}
}

// Planning a model whose own job is huge (a Wan folder's 832x480, 81 frames) without
// sizes is refused before anything is measured, naming the sizes it would have planned.
func TestPlanRefusesHugeDefaults(t *testing.T) {
	t.Setenv("VDPP_CACHE_DIR", t.TempDir())
	src, err := builtin.Resolve(builtin.WanName)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "wan")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "vdpp_sampling.json")); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runHere("plan", "--model", dir, "--devices", "2")
	if code != 2 || !strings.Contains(errOut, "81 frames at 832x480, 50 steps") || !strings.Contains(errOut, "give the sizes") {
		t.Fatalf("exit %d, %q; want a refusal naming the sizes", code, errOut)
	}
}
