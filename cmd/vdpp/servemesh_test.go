package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeMeshes: serve's workers run the meshes generate runs, and a served job's video
// is the bytes of `vdpp generate`'s for the same model, parameters and seed (generate's pp,
// dp and cfg meshes give the one-process bytes, TestGenerateMeshes; a cp mesh is compared
// with generate's cp mesh).
func TestServeMeshes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	imgPath := testImage(t)
	img, err := os.ReadFile(imgPath)
	if err != nil {
		t.Fatal(err)
	}
	// generate's video of each mesh: one process (pp and dp meshes give its bytes), the cfg
	// pair, and the cp meshes (a context-parallel model matches one process within float
	// tolerance only, so cp is compared with cp).
	generated := func(mesh ...string) []byte {
		t.Helper()
		out := fmt.Sprintf("gen-%d", len(mesh))
		for _, f := range mesh {
			out += strings.TrimLeft(f, "-")
		}
		args := append([]string{"generate", "--model", "builtin", "--image", imgPath, "--steps", "2",
			"--num-frames", "2", "--seed", "9", "--out", out, "--quiet"}, mesh...)
		if code, stdout, stderr := vdppIn(t, dir, args...); code != 0 {
			t.Fatalf("generate %v: exit %d\n%s%s", mesh, code, stdout, stderr)
		}
		gif, err := os.ReadFile(filepath.Join(dir, out, "sample-000", "video.gif"))
		if err != nil {
			t.Fatal(err)
		}
		return gif
	}
	want, wantCFG, wantCP, wantCFGCP := generated(), generated("--cfg", "2"), generated("--cp", "2"), generated("--cfg", "2", "--cp", "2")
	for _, tc := range []struct {
		name string
		mesh []string
		want []byte
	}{
		{"dp2", []string{"--dp", "2"}, want},
		{"pp2 x dp2", []string{"--pp", "2", "--dp", "2"}, want},
		{"cfg2", []string{"--cfg", "2"}, wantCFG},
		{"pp2 x cfg2", []string{"--pp", "2", "--cfg", "2"}, wantCFG},
		{"cp2", []string{"--cp", "2"}, wantCP},
		{"cfg2 x cp2", []string{"--cfg", "2", "--cp", "2"}, wantCFGCP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp := startServe(t, serveOptions{}, append([]string{"--model", "builtin"}, tc.mesh...)...)
			id := sp.mustSubmit(`{"num_frames":2,"steps":2,"seed":9}`, img)
			if st := sp.wait(id, 2*time.Minute); st.State != "succeeded" {
				t.Fatalf("job: %+v\n%s", st, lastLines(sp.stderr.String(), 20))
			}
			code, gif := sp.get("/v1/videos/" + id + "/content?format=gif")
			if code != http.StatusOK || !bytes.Equal(gif, tc.want) {
				t.Fatalf("served GIF (%d, %d bytes) differs from vdpp generate's video.gif (%d bytes)", code, len(gif), len(tc.want))
			}
			if tc.name == "cp2" {
				// A job of one latent frame has no frame for the second cp rank.
				code, body := sp.submit(map[string][]byte{"params": []byte(`{"num_frames":1,"steps":2}`), "image": img})
				if code != http.StatusBadRequest || !strings.Contains(string(body), "every cp rank needs one") {
					t.Fatalf("a one-frame job on cp=2: %d %s", code, body)
				}
			}
		})
	}
}

// TestServeDataParallelKill: killing the rank that holds a job in a dp=2 server loses
// nothing: the job is re-run from its last hand-off (on the other replica or the restarted
// rank) and ends with the bits of a run without a fault.
func TestServeDataParallelKill(t *testing.T) {
	t.Parallel()
	sp := startServe(t, serveOptions{}, "--model", "synthetic", "--step-ms", "150", "--dp", "2", "--max-batch", "1")
	img, err := os.ReadFile(testImage(t))
	if err != nil {
		t.Fatal(err)
	}
	const params = `{"num_frames":2,"steps":8,"height":8,"width":8,"seed":4}`
	// The first job goes to the least busy replica with the lowest rank: rank 0.
	killMidJob(t, sp, params, img, 0)
	_, w := sp.get("/v1/admin/workers")
	var workers []struct{ Rank, Replica, Restarts int }
	if err := json.Unmarshal(w, &workers); err != nil || len(workers) != 2 || workers[1].Replica != 1 || workers[0].Restarts != 1 {
		t.Fatalf("workers %s (%v)", w, err)
	}
}

// TestServeCFGUnitKill: killing the member of a cfg=2 unit while the unit computes a job
// loses nothing: the unit restarts, the job re-runs from the latent the coordinator holds
// and ends with the bits of a run without a fault. An unguided job is refused in one line.
func TestServeCFGUnitKill(t *testing.T) {
	t.Parallel()
	sp := startServe(t, serveOptions{}, "--model", "synthetic", "--step-ms", "150", "--cfg", "2", "--max-batch", "1")
	img, err := os.ReadFile(testImage(t))
	if err != nil {
		t.Fatal(err)
	}
	const params = `{"num_frames":2,"steps":8,"height":8,"width":8,"seed":4,"max_guidance":3}`
	killMidJob(t, sp, params, img, 1)
	_, w := sp.get("/v1/admin/workers")
	var workers []struct {
		Rank, Restarts int
		Connected      bool
	}
	if err := json.Unmarshal(w, &workers); err != nil || len(workers) != 2 || workers[1].Restarts != 1 || !workers[0].Connected || !workers[1].Connected {
		t.Fatalf("workers %s (%v): want both ranks of the unit connected again, rank 1 restarted once", w, err)
	}
	code, body := sp.submit(map[string][]byte{"params": []byte(`{"num_frames":2,"steps":2,"height":8,"width":8,"max_guidance":1}`), "image": img})
	if code != http.StatusBadRequest || !strings.Contains(string(body), "unguided") {
		t.Fatalf("an unguided job on cfg=2: %d %s", code, body)
	}
}

// killMidJob kills rank once a job of params holds its first step, and checks that the job
// succeeds after a restart with the latent of a run without a fault.
func killMidJob(t *testing.T, sp *serveProc, params string, img []byte, rank int) {
	t.Helper()
	id := sp.mustSubmit(params, img)
	sp.waitStep(id, 1, time.Minute)
	if code, b := sp.do("POST", fmt.Sprintf("/v1/admin/workers/%d/kill", rank)); code != http.StatusAccepted {
		t.Fatalf("kill: %d %s", code, b)
	}
	st := sp.wait(id, time.Minute)
	if st.State != "succeeded" || st.Restarts < 1 {
		t.Fatalf("after the kill: %+v\n%s", st, lastLines(sp.stderr.String(), 20))
	}
	again := sp.mustSubmit(params, img)
	if st := sp.wait(again, time.Minute); st.State != "succeeded" || st.Restarts != 0 {
		t.Fatalf("the run without a fault: %+v", st)
	}
	_, a := sp.get("/v1/videos/" + id + "/content?format=latent")
	_, b := sp.get("/v1/videos/" + again + "/content?format=latent")
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("the killed job's latent (%d bytes) differs from the run without a fault (%d bytes)", len(a), len(b))
	}
}

// TestServePlanAuto: `vdpp serve --plan auto --nproc K` starts the pp x dp mesh the planner
// picks for K devices (said in the log), and serves on it. For the guided simulator's
// latency the best mesh of all is cp=2 (`vdpp bench --plan auto --goal latency` runs it),
// which serve's workers do not run: serve takes the best pp x dp mesh.
func TestServePlanAuto(t *testing.T) {
	t.Parallel()
	sp := startServe(t, serveOptions{}, "--model", "synthetic", "--step-ms", "2", "--plan", "auto", "--nproc", "2", "--goal", "latency")
	m := regexp.MustCompile(`--plan auto chose the workers' mesh.* mesh="pp=(\d) cfg=1 cp=1 dp=(\d)"`).FindStringSubmatch(sp.stderr.String())
	if m == nil || (m[1]+m[2] != "12" && m[1]+m[2] != "21") {
		t.Fatalf("no pp x dp mesh of 2 ranks in the log:\n%s", lastLines(sp.stderr.String(), 20))
	}
	_, w := sp.get("/v1/admin/workers")
	var workers []struct{ Rank, Replica, Stage int }
	if err := json.Unmarshal(w, &workers); err != nil || len(workers) != 2 || (m[2] == "2") != (workers[1].Replica == 1) {
		t.Fatalf("workers %s (%v) for pp=%s dp=%s", w, err, m[1], m[2])
	}
	img, err := os.ReadFile(testImage(t))
	if err != nil {
		t.Fatal(err)
	}
	id := sp.mustSubmit(`{"num_frames":2,"steps":4,"height":8,"width":8,"seed":1}`, img)
	if st := sp.wait(id, time.Minute); st.State != "succeeded" {
		t.Fatalf("job: %+v", st)
	}
	// A model whose step needs conditioning (the built-in SVD) is measured with the
	// family's random conditioning.
	sp = startServe(t, serveOptions{}, "--model", "builtin", "--plan", "auto", "--nproc", "1")
	if !strings.Contains(sp.stderr.String(), `mesh="pp=1 cfg=1 cp=1 dp=1"`) {
		t.Fatalf("builtin --plan auto --nproc 1:\n%s", lastLines(sp.stderr.String(), 20))
	}
}
