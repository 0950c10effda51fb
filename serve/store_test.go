package serve

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vdpp/vdpp/serve/job"
)

// storeFixture writes n finished jobs (record, upload, latent) into a store under dir and
// closes it; it returns their records.
func storeFixture(t testing.TB, dir string, n int) []job.Record {
	t.Helper()
	st, _, err := openStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var recs []job.Record
	for i := range n {
		r := job.Record{ID: newID(), Seq: uint64(i + 1), State: job.StateSucceeded, CreatedAt: created, FinishedAt: &created,
			Params: job.Params{NumFrames: 1, Steps: 2, Height: 8, Width: 8, FPS: 7}, LatentShape: []int{1, 1, 4, 1, 1}, Rev: 3}
		if i == n-1 {
			r.State, r.FinishedAt, r.LatentShape = job.StateQueued, nil, nil
		}
		if err := st.WriteFile(r.ID, inputFile, testPNG(t, i)); err != nil {
			t.Fatal(err)
		}
		if r.State == job.StateSucceeded {
			if err := st.WriteFile(r.ID, finalFile, make([]byte, 16)); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Put(r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// jobFolders lists the job folders under dir.
func jobFolders(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "jobs"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// TestStoreRebuildsIndex: an index that is missing, empty, truncated, corrupt or not an
// index at all is set aside (when there is a file) and rebuilt from the job folders: every
// job comes back as it was, no folder is touched, and start-up neither crashes nor fails.
func TestStoreRebuildsIndex(t *testing.T) {
	for _, c := range []struct {
		name        string
		breakIt     func(path string) error
		quarantined int
	}{
		{"missing", os.Remove, 0},
		{"empty", func(p string) error { return os.Truncate(p, 0) }, 0},
		{"truncated after its meta pages", func(p string) error { return os.Truncate(p, int64(2*os.Getpagesize()+100)) }, 1},
		{"meta pages zeroed", func(p string) error {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			zero := make([]byte, 2*os.Getpagesize())
			_, err = f.WriteAt(zero, 0)
			return err
		}, 1},
		{"garbage", func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte("not bbolt "), 5000), 0o600) }, 1},
		{"short garbage", func(p string) error { return os.WriteFile(p, []byte("x"), 0o600) }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			want := storeFixture(t, dir, 4)
			folders := jobFolders(t, dir)
			if err := c.breakIt(filepath.Join(dir, indexFile)); err != nil {
				t.Fatal(err)
			}
			st, recs, err := openStore(dir, nil)
			if err != nil {
				t.Fatalf("openStore: %v", err)
			}
			defer st.Close()
			if !reflect.DeepEqual(recs, want) {
				t.Errorf("records after the rebuild:\n%+v\nwant\n%+v", recs, want)
			}
			if got := jobFolders(t, dir); !reflect.DeepEqual(got, folders) {
				t.Errorf("job folders %v, want %v", got, folders)
			}
			if st.report.Recovered != len(want) || st.report.Quarantined != c.quarantined {
				t.Errorf("report %+v, want %d recovered and %d quarantined", st.report, len(want), c.quarantined)
			}
			if q, _ := filepath.Glob(filepath.Join(dir, quarantineDir, indexFile+".*")); len(q) != c.quarantined {
				t.Errorf("quarantined index files %v, want %d", q, c.quarantined)
			}
			if idx, err := st.All(); err != nil || !reflect.DeepEqual(idx, want) {
				t.Errorf("rebuilt index %+v, %v", idx, err)
			}
		})
	}
}

// TestStoreBadRecords: a record the index cannot decode is moved to the quarantine and its
// job recovered from its folder; a job whose two copies are both unreadable has its folder
// moved to the quarantine (never deleted); a record with an unknown state is not served.
func TestStoreBadRecords(t *testing.T) {
	dir := t.TempDir()
	recs := storeFixture(t, dir, 4)
	db, err := bolt.Open(filepath.Join(dir, indexFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := func(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(jobsBucket)
		if err := b.Put(key(recs[0].Seq), []byte(`{"id": "`+recs[0].ID+`", "seq": 1, "state": "succe`)); err != nil {
			return err
		}
		if err := b.Put(key(recs[1].Seq), []byte(`{"id": "`+recs[1].ID+`", "seq": 2, "state": "exploded"}`)); err != nil {
			return err
		}
		return b.Put(key(recs[2].Seq), []byte{0xff, 0xfe})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Job 2's folder copy is unreadable too: nothing can say what it was.
	if err := os.WriteFile(filepath.Join(dir, "jobs", recs[2].ID, recordFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Job 1's folder copy has the unknown state as well.
	if err := os.WriteFile(filepath.Join(dir, "jobs", recs[1].ID, recordFile), []byte(`{"id": "`+recs[1].ID+`", "seq": 2, "state": "exploded"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	st, got, err := openStore(dir, nil)
	if err != nil {
		t.Fatalf("openStore: %v", err)
	}
	defer st.Close()
	if want := []job.Record{recs[0], recs[3]}; !reflect.DeepEqual(got, want) {
		t.Errorf("records %+v\nwant %+v", got, want)
	}
	// Three index records and two folders set aside.
	if st.report.Quarantined != 5 || st.report.Recovered != 1 {
		t.Errorf("report %+v, want 5 quarantined and 1 recovered", st.report)
	}
	for _, id := range []string{recs[1].ID, recs[2].ID} {
		if q, _ := filepath.Glob(filepath.Join(dir, quarantineDir, "job-"+id+".*", inputFile)); len(q) != 1 {
			t.Errorf("folder of job %s not in the quarantine: %v", id, q)
		}
	}
	if q, _ := filepath.Glob(filepath.Join(dir, quarantineDir, "record-*")); len(q) != 3 {
		t.Errorf("quarantined index records %v, want 3", q)
	}
}

// TestStoreNewerCopyWins: of the index's record and the folder's, start-up serves the one
// of the higher Rev and makes the other agree.
func TestStoreNewerCopyWins(t *testing.T) {
	dir := t.TempDir()
	recs := storeFixture(t, dir, 2)
	newer := recs[1]
	newer.State, newer.Error, newer.Rev = job.StateFailed, "stopped", newer.Rev+1
	b, err := encodeRecord(newer)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jobs", newer.ID, recordFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, got, err := openStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []job.Record{recs[0], newer}; !reflect.DeepEqual(got, want) {
		t.Errorf("records %+v\nwant %+v", got, want)
	}
	st.Close()
	// The index agrees now: the folder copy can go and nothing changes.
	os.Remove(filepath.Join(dir, "jobs", newer.ID, recordFile))
	st, got, err = openStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !reflect.DeepEqual(got[1], newer) {
		t.Errorf("after the folder copy went: %+v, want %+v", got[1], newer)
	}
	if rb, err := st.readFolderRecord(newer.ID); err != nil || !reflect.DeepEqual(rb, newer) {
		t.Errorf("folder copy not written back: %+v, %v", rb, err)
	}
}

// TestStoreLocked: a second store on the same data dir is refused, and takes it once the
// first is closed.
func TestStoreLocked(t *testing.T) {
	dir := t.TempDir()
	st, _, err := openStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := openStore(dir, nil); err == nil {
		t.Fatal("a second store opened the same data dir")
	}
	st.Close()
	st, _, err = openStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
}

// FuzzOpenIndex: whatever bytes sit in jobs.db, start-up neither crashes nor fails, and no
// job folder is deleted (each comes back, from its record.json).
func FuzzOpenIndex(f *testing.F) {
	seed := f.TempDir()
	storeFixture(f, seed, 2)
	valid, err := os.ReadFile(filepath.Join(seed, indexFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add(valid[:os.Getpagesize()*2])
	f.Add([]byte{})
	f.Add([]byte("garbage"))
	broken := slices.Clone(valid)
	broken[len(broken)-100] ^= 0xff
	f.Add(broken)
	f.Fuzz(func(t *testing.T, index []byte) {
		dir := t.TempDir()
		want := storeFixture(t, dir, 2)
		if err := os.WriteFile(filepath.Join(dir, indexFile), index, 0o600); err != nil {
			t.Fatal(err)
		}
		st, recs, err := openStore(dir, nil)
		if err != nil {
			t.Fatalf("openStore: %v", err)
		}
		st.Close()
		ids := map[string]bool{}
		for _, r := range recs {
			ids[r.ID] = true
		}
		for _, r := range want {
			if !ids[r.ID] {
				t.Errorf("job %s lost", r.ID)
			}
		}
	})
}

// FuzzReadIndex: the index reader answers any bytes with records or an error wrapping
// errCorruptIndex, never a panic, and reads every record of a valid index.
func FuzzReadIndex(f *testing.F) {
	seed := f.TempDir()
	want := storeFixture(f, seed, 3)
	valid, err := os.ReadFile(filepath.Join(seed, indexFile))
	if err != nil {
		f.Fatal(err)
	}
	got, err := readIndex(valid)
	if err != nil || len(got) != len(want) {
		f.Fatalf("the reader finds %d records, %v; want %d", len(got), err, len(want))
	}
	f.Add(valid)
	f.Add(valid[:os.Getpagesize()*2+10])
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := readIndex(b)
		if err != nil && !errors.Is(err, errCorruptIndex) {
			t.Fatalf("error %v does not wrap errCorruptIndex", err)
		}
		if err != nil && recs != nil {
			t.Fatal("records with an error")
		}
	})
}

// TestReadIndexMutations: thousands of random corruptions of a valid index (bytes changed,
// the file cut short) are each read or refused, never a panic or a hang; the fuzzer
// searches further.
func TestReadIndexMutations(t *testing.T) {
	seed := t.TempDir()
	storeFixture(t, seed, 3)
	valid, err := os.ReadFile(filepath.Join(seed, indexFile))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		b := slices.Clone(valid)
		for range 1 + r.IntN(8) {
			b[r.IntN(len(b))] = byte(r.IntN(256))
		}
		if r.IntN(5) == 0 {
			b = b[:r.IntN(len(b))]
		}
		if _, err := readIndex(b); err != nil && !errors.Is(err, errCorruptIndex) {
			t.Fatalf("error %v does not wrap errCorruptIndex", err)
		}
	}
}
