package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vdpp/vdpp/serve/loadtest"
)

// finishedJobs runs n small jobs to success on sp and returns their ids.
func finishedJobs(t *testing.T, sp *serveProc, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, sp.mustSubmit(fmt.Sprintf(`{"num_frames":1,"steps":2,"height":8,"width":8,"seed":%d}`, i), loadtest.TestImage(int64(i))))
	}
	for _, id := range ids {
		if st := sp.wait(id, 20*time.Second); st.State != "succeeded" {
			t.Fatalf("job %s: %+v", id, st)
		}
	}
	return ids
}

// TestServeFaultLostIndex: with the job index (jobs.db) missing, empty, truncated or
// replaced by garbage while the server was down, the next start neither crashes nor loses
// a job: every job comes back from its folder, downloads work, and an index it could not
// read is in the quarantine, counted.
func TestServeFaultLostIndex(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"--model", "synthetic", "--nproc", "1", "--step-ms", "1"}
	sp := startServe(t, serveOptions{dir: dir}, args...)
	ids := finishedJobs(t, sp, 3)
	sp.kill()
	index := filepath.Join(dir, "jobs.db")
	for _, c := range []struct {
		name        string
		breakIt     func() error
		quarantined float64
	}{
		{"missing", func() error { return os.Remove(index) }, 0},
		{"empty", func() error { return os.Truncate(index, 0) }, 0},
		{"truncated", func() error { return os.Truncate(index, int64(2*os.Getpagesize()+100)) }, 1},
		{"garbage", func() error { return os.WriteFile(index, bytes.Repeat([]byte{0xee}, 64<<10), 0o600) }, 1},
	} {
		if err := c.breakIt(); err != nil {
			t.Fatal(err)
		}
		sp := startServe(t, serveOptions{dir: dir}, args...)
		for _, id := range ids {
			if st := sp.status(id); st.State != "succeeded" {
				t.Errorf("%s index: job %s is %s after the restart", c.name, id, st.State)
			}
			if code, _ := sp.get("/v1/videos/" + id + "/content?format=latent"); code != 200 {
				t.Errorf("%s index: latent of job %s: %d", c.name, id, code)
			}
		}
		if n := sp.metric("vdpp_store_recovered_total"); n != float64(len(ids)) {
			t.Errorf("%s index: vdpp_store_recovered_total %v, want %d", c.name, n, len(ids))
		}
		if n := sp.metric("vdpp_store_quarantined_total"); n != c.quarantined {
			t.Errorf("%s index: vdpp_store_quarantined_total %v, want %v", c.name, n, c.quarantined)
		}
		sp.kill()
	}
	if q, _ := filepath.Glob(filepath.Join(dir, "quarantine", "jobs.db.*")); len(q) != 2 {
		t.Errorf("quarantined indexes %v, want the truncated one and the garbage", q)
	}
}

// editIndex rewrites, while the server is down, the index record of each job named in
// edit with what edit returns for it (nil: the record's own bytes, changed in place).
func editIndex(t *testing.T, dir string, edit map[string]func(rec map[string]any, raw []byte) []byte) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "jobs.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("jobs"))
		type kv struct{ k, v []byte }
		var all []kv
		b.ForEach(func(k, v []byte) error { all = append(all, kv{bytes.Clone(k), bytes.Clone(v)}); return nil })
		for _, e := range all {
			var rec map[string]any
			if err := json.Unmarshal(e.v, &rec); err != nil {
				return err
			}
			if f := edit[rec["id"].(string)]; f != nil {
				if err := b.Put(e.k, f(rec, e.v)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestServeFaultBadRecords: records changed while the server was down are checked at the
// next start, which never crashes: a record with one corrupt byte is set aside and its job
// comes back from its folder; a job whose two copies say an unknown state is set aside (its
// folder in the quarantine), not run again; a succeeded job whose latent file is gone shows
// failed (its download a 409, not a 500); a queued job over --max-steps ends failed without
// running.
func TestServeFaultBadRecords(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"--model", "synthetic", "--nproc", "1", "--step-ms", "1", "--max-steps", "50"}
	sp := startServe(t, serveOptions{dir: dir}, args...)
	ids := finishedJobs(t, sp, 4)
	sp.kill()
	corrupt, unknown, lost, over := ids[0], ids[1], ids[2], ids[3]
	editIndex(t, dir, map[string]func(map[string]any, []byte) []byte{
		corrupt: func(_ map[string]any, raw []byte) []byte { raw = bytes.Clone(raw); raw[len(raw)/2] = 0; return raw },
		unknown: func(rec map[string]any, _ []byte) []byte {
			rec["state"] = "exploded"
			b, _ := json.Marshal(rec)
			return b
		},
		over: func(rec map[string]any, _ []byte) []byte {
			rec["state"], rec["finished_at"], rec["latent_shape"] = "queued", nil, nil
			rec["params"].(map[string]any)["steps"] = 99
			b, _ := json.Marshal(rec)
			return b
		},
	})
	if err := os.WriteFile(filepath.Join(dir, "jobs", unknown, "record.json"), []byte(`{"id": "`+unknown+`", "seq": 2, "state": "exploded"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "jobs", lost, "final.f32")); err != nil {
		t.Fatal(err)
	}

	sp = startServe(t, serveOptions{dir: dir}, args...)
	if st := sp.status(corrupt); st.State != "succeeded" {
		t.Errorf("job with a corrupt index record: %+v", st)
	}
	if code, b := sp.get("/v1/videos/" + unknown); code != http.StatusNotFound {
		t.Errorf("job of an unknown state: %d %s, want 404", code, b)
	}
	if q, _ := filepath.Glob(filepath.Join(dir, "quarantine", "job-"+unknown+".*", "input.img")); len(q) != 1 {
		t.Errorf("the unknown-state job's folder is not in the quarantine: %v", q)
	}
	if st := sp.status(lost); st.State != "failed" || st.Error == "" {
		t.Errorf("succeeded job without its latent: %+v, want failed with a reason", st)
	}
	if code, b := sp.get("/v1/videos/" + lost + "/content"); code != http.StatusConflict {
		t.Errorf("download of the job without its latent: %d %s, want 409", code, b)
	}
	if st := sp.status(over); st.State != "failed" || st.Progress.Step != 0 {
		t.Errorf("queued job over --max-steps: %+v, want failed without a step", st)
	}
	if n := sp.metric("vdpp_store_quarantined_total"); n != 3 {
		t.Errorf("vdpp_store_quarantined_total %v, want 3 (two index records and a folder)", n)
	}
	if n := sp.metric("vdpp_jobs_failed_total"); n != 0 {
		t.Errorf("vdpp_jobs_failed_total %v: a check at start-up is not a run that failed", n)
	}
}
