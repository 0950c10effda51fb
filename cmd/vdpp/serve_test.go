package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/loadtest"
)

// TestServeBinary runs the real `vdpp serve` with worker processes: the one listening line,
// a job end to end, a SIGKILLed worker that is restarted while jobs still complete
// bit-identically (checked by `vdpp loadtest --verify`), and a clean SIGTERM shutdown.
func TestServeBinary(t *testing.T) {
	dir := t.TempDir()
	sp := startServe(t, serveOptions{dir: filepath.Join(dir, "data")}, "--model", "synthetic", "--nproc", "3", "--step-ms", "2")
	url, pids, stderr := sp.url, sp.pids, sp.stderr

	// One job by hand: submit, follow, download the MP4.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormField("params")
	fw.Write([]byte(`{"num_frames":2,"steps":6,"height":16,"width":16,"seed":5}`))
	fw, _ = mw.CreateFormFile("image", "a.png")
	fw.Write(loadtest.TestImage(5))
	mw.Close()
	resp, err := http.Post(url+"/v1/videos", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ ID, State string }
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || st.ID == "" {
		t.Fatalf("submit: %d %+v", resp.StatusCode, st)
	}
	for deadline := time.Now().Add(10 * time.Second); st.State != "succeeded"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job still %s", st.State)
		}
		r, err := http.Get(url + "/v1/videos/" + st.ID)
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(r.Body).Decode(&st)
		r.Body.Close()
	}
	r, err := http.Get(url + "/v1/videos/" + st.ID + "/content")
	if err != nil {
		t.Fatal(err)
	}
	mp4, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || len(mp4) < 8 || string(mp4[4:8]) != "ftyp" {
		t.Fatalf("mp4: %d, %d bytes", r.StatusCode, len(mp4))
	}

	// Load with a rank killed (SIGKILL through the pid file) every 300 ms, verified.
	report := filepath.Join(dir, "lt.json")
	lt := exec.Command(vdppBin, "loadtest", "--url", url, "--clients", "6", "--duration", "1500ms", "--verify",
		"--kill-every", "300ms", "--kill-rank-pid-file", pids, "--json", report)
	if out, err := lt.CombinedOutput(); err != nil {
		t.Fatalf("loadtest: %v\n%s\nserver:\n%s", err, out, stderr.String())
	}
	var rep loadtest.Report
	b, _ := os.ReadFile(report)
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kills < 1 || rep.Completed == 0 || rep.Completed != rep.Submitted || *rep.OutputsMismatched != 0 || *rep.OutputsVerified != rep.Completed {
		t.Fatalf("report %s", b)
	}
	sp.waitReady() // every rank came back

	// SIGTERM: the server and its workers exit.
	workerPids := readPids(t, pids)
	if err := sp.stop(10 * time.Second); err != nil {
		t.Fatalf("server exit: %v\n%s", err, stderr.String())
	}
	eventually(5*time.Second, func() bool {
		for _, pid := range workerPids {
			if syscall.Kill(pid, 0) == nil {
				return false
			}
		}
		return true
	})
	for _, pid := range workerPids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("worker pid %d survived the server", pid)
		}
	}
}

func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rank, pid int
		if n, _ := fmt.Sscan(l, &rank, &pid); n == 2 {
			out = append(out, pid)
		}
	}
	return out
}

// TestServeKeepJobsFlag: --keep-jobs defaults to job.DefaultKeepJobs, 0 keeps jobs
// forever, and a negative value is a usage error.
func TestServeKeepJobsFlag(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    time.Duration
		wantErr error
	}{
		{"default", nil, job.DefaultKeepJobs, nil},
		{"forever", []string{"--keep-jobs", "0"}, 0, nil},
		{"a day and a half", []string{"--keep-jobs=36h"}, 36 * time.Hour, nil},
		{"negative", []string{"--keep-jobs", "-1h"}, 0, errUsage},
		{"not a duration", []string{"--keep-jobs", "7d"}, 0, errUsage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, _, _, _, err := parseServeFlags(c.args, &stderr, &stderr)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("parseServeFlags(%q): %v, want %v", c.args, err, c.wantErr)
				}
				return
			}
			if err != nil || cfg.KeepJobs != c.want {
				t.Fatalf("parseServeFlags(%q): keep %v, %v; want %v", c.args, cfg.KeepJobs, err, c.want)
			}
		})
	}
}

// serve defaults to the built-in model (not the synthetic stand-in), takes the mesh flags
// as generate and bench do (--nproc alone: a pipeline; --pp --dp: replicas of pipelines;
// --cfg 2, --cp C: a unit of ranks per stage)
// and refuses mesh mistakes in one line each; --model ORG/NAME is found in the Hugging Face
// cache or refused saying where it looked.
func TestServeModelAndMeshFlags(t *testing.T) {
	var stderr bytes.Buffer
	cfg, model, _, mf, err := parseServeFlags(nil, &stderr, &stderr)
	if err != nil || model != "builtin" || cfg.NProc != 2 || cfg.Mesh != (comm.Mesh{PP: 2, CFG: 1, CP: 1, DP: 1}) || mf.given || mf.plan {
		t.Fatalf("defaults: model %q, nproc %d, mesh %v, flags %+v, %v", model, cfg.NProc, cfg.Mesh, mf, err)
	}
	for args, want := range map[string]comm.Mesh{
		"--pp 3":           {PP: 3, CFG: 1, CP: 1, DP: 1},
		"--nproc 3":        {PP: 3, CFG: 1, CP: 1, DP: 1},
		"--dp 2":           {PP: 1, CFG: 1, CP: 1, DP: 2},
		"--nproc 4 --dp 2": {PP: 2, CFG: 1, CP: 1, DP: 2},
		"--pp 2 --dp 2":    {PP: 2, CFG: 1, CP: 1, DP: 2},
		"--cfg 2":          {PP: 1, CFG: 2, CP: 1, DP: 1},
		"--pp 2 --cfg 2":   {PP: 2, CFG: 2, CP: 1, DP: 1},
		"--cp 2 --dp 2":    {PP: 1, CFG: 1, CP: 2, DP: 2},
		"--cfg 2 --cp 2":   {PP: 1, CFG: 2, CP: 2, DP: 1},
	} {
		cfg, _, _, mf, err := parseServeFlags(strings.Fields(args), &stderr, &stderr)
		if err != nil || cfg.Mesh != want || cfg.NProc != want.Size() || !mf.given || mf.plan {
			t.Errorf("%s: mesh %v, nproc %d, flags %+v, %v; want %v", args, cfg.Mesh, cfg.NProc, mf, err, want)
		}
	}
	// --plan auto: the mesh is chosen at start (serveAutoMesh) for --nproc devices.
	for _, c := range []struct {
		args    string
		want    serveMeshFlags
		devices int
	}{
		{"--plan auto", serveMeshFlags{plan: true, goal: "throughput"}, 2},
		{"--plan auto --nproc 4 --goal latency", serveMeshFlags{given: true, plan: true, goal: "latency"}, 4},
	} {
		cfg, _, _, mf, err := parseServeFlags(strings.Fields(c.args), &stderr, &stderr)
		if err != nil || mf != c.want || cfg.NProc != c.devices || cfg.Mesh != (comm.Mesh{}) {
			t.Errorf("%s: flags %+v, nproc %d, mesh %v, %v; want %+v on %d devices", c.args, mf, cfg.NProc, cfg.Mesh, err, c.want, c.devices)
		}
	}
	for args, want := range map[string]string{
		"--nproc 2 --pp 3":        "--nproc 2 but --pp 3",
		"--dp 0 --pp -1":          "--pp -1: every degree must be at least 1",
		"--cfg 3":                 "--cfg 3: classifier-free guidance has two halves (use 1 or 2)",
		"--plan manual":           `--plan "manual": only "auto" is known`,
		"--plan auto --dp 2":      "--plan auto chooses --pp and --dp itself; give only --nproc",
		"--plan auto --goal fast": "--goal: ",
	} {
		_, _, _, _, err := parseServeFlags(strings.Fields(args), &stderr, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a usage error with %q", args, err, want)
		}
	}
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	_, err = modelSpec("stabilityai/stable-video-diffusion-img2vid-xt")
	if !errors.Is(err, family.ErrNotCached) || !strings.Contains(err.Error(), "models--stabilityai--stable-video-diffusion-img2vid-xt") {
		t.Fatalf("a model not in the cache: %v", err)
	}
	if got := servedModelNames(nil, "stabilityai/stable-video-diffusion-img2vid-xt"); got[0] != "stabilityai/stable-video-diffusion-img2vid-xt" {
		t.Fatalf("served name of a Hugging Face id: %v", got)
	}
}
