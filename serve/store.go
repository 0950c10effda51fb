package serve

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

var jobsBucket = []byte("jobs")

// jobStore keeps job records in a bbolt index (DIR/jobs.db) and in each job's folder
// DIR/jobs/ID/, with the job's files: record.json (its record, so a lost index is rebuilt
// from the folders), input.img (the uploaded image), final.f32 (the final latent,
// little-endian float32) and rendered outputs. Files are written to a temporary name,
// synced and renamed before the record that points at them is committed. A deleted job's
// folder is first renamed into DIR/trash/ (so its files vanish at once) and removed there,
// then its record is deleted (see RemoveFiles and Delete). What start-up cannot read is
// moved to DIR/quarantine/, never deleted (storeload.go).
type jobStore struct {
	db     *bolt.DB
	dir    string
	log    *slog.Logger
	unlock func()
	// report is what start-up found and did (load).
	report loadReport
}

// openStore opens (creating) the store under dir and loads it: the records to serve, in
// submission order (see load). Only one process may hold a data dir.
func openStore(dir string, log *slog.Logger) (*jobStore, []job.Record, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, sub := range []string{"jobs", "trash"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, nil, fmt.Errorf("serve: data dir: %w", err)
		}
	}
	unlock, err := lockDir(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, nil, fmt.Errorf("serve: data dir %s: %w (is another server using this --data-dir?)", dir, err)
	}
	s := &jobStore{dir: dir, log: log, unlock: unlock}
	recs, err := s.rebuild()
	if err != nil {
		unlock()
		return nil, nil, err
	}
	logReport(log, s.report)
	return s, recs, nil
}

// rebuild reads the index and the job folders (readIndex, load), writes the records to a
// fresh index renamed over the old one, and opens it.
func (s *jobStore) rebuild() ([]job.Record, error) {
	path := filepath.Join(s.dir, indexFile)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("serve: read %s: %w", path, err)
	}
	entries, err := readIndex(data)
	if err != nil {
		if qerr := s.quarantine(path, indexFile, err.Error()); qerr != nil {
			return nil, qerr
		}
		entries = nil
	}
	recs, err := s.load(entries)
	if err != nil {
		return nil, err
	}
	fresh := path + ".new"
	os.Remove(fresh) // left by an interrupted start
	db, err := bolt.Open(fresh, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("serve: new index: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(jobsBucket)
		if err != nil {
			return err
		}
		for _, r := range recs {
			enc, err := encodeRecord(r)
			if err != nil {
				return err
			}
			if err := b.Put(seqKey(r.Seq), enc); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(fresh, path)
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("serve: new index: %w", err)
	}
	if s.db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second}); err != nil {
		return nil, fmt.Errorf("serve: open %s: %w", path, err)
	}
	return recs, nil
}

// Close closes the index and gives the data dir up.
func (s *jobStore) Close() error {
	err := s.db.Close()
	s.unlock()
	return err
}

// encodeRecord is r as stored.
func encodeRecord(r job.Record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("serve: encode job %s: %w", r.ID, err)
	}
	return b, nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// Put writes rec to the index (keyed by its sequence number, so the index lists jobs in
// submission order), then to its folder's record.json. Concurrent Puts commit to the index
// together (bbolt's Batch), each returning once durable. The index decides: a folder copy
// that cannot be written is only logged (start-up rewrites it from the index); it matters
// when the index is lost.
func (s *jobStore) Put(rec job.Record) error {
	b, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	err = s.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(jobsBucket).Put(seqKey(rec.Seq), b) })
	if err != nil {
		return fmt.Errorf("serve: store job %s: %w", rec.ID, err)
	}
	if err := s.WriteFile(rec.ID, recordFile, b); err != nil {
		s.log.Warn("the job folder's copy of its record is behind the index", "id", rec.ID, "err", err)
	}
	return nil
}

// Delete removes the records of recs (found by sequence number; a record there with
// another id is left alone) in one transaction. A missing record is not an error.
func (s *jobStore) Delete(recs []job.Record) error {
	if len(recs) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(jobsBucket)
		for _, r := range recs {
			v := b.Get(seqKey(r.Seq))
			if v == nil {
				continue
			}
			var have struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(v, &have) != nil || have.ID != r.ID {
				continue // another job's record (load set aside the unreadable ones)
			}
			if err := b.Delete(seqKey(r.Seq)); err != nil {
				return fmt.Errorf("serve: delete job %s: %w", r.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("serve: delete %d job records: %w", len(recs), err)
	}
	return nil
}

// RemoveFiles deletes job id's folder: it is renamed into DIR/trash/ first, so the job's
// files disappear together and nothing written into the old path afterwards can land in
// what is being removed, then removed. A job without a folder is not an error.
func (s *jobStore) RemoveFiles(id string) error {
	dir, err := s.JobDir(id)
	if err != nil {
		return err
	}
	trash := filepath.Join(s.dir, "trash", id)
	if err := os.RemoveAll(trash); err != nil { // left by an interrupted delete
		return fmt.Errorf("serve: job %s: %w", id, err)
	}
	if err := os.Rename(dir, trash); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("serve: job %s: detach files: %w", id, err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("serve: job %s: remove files: %w", id, err)
	}
	return nil
}

// JobDir is the folder of job id's files.
func (s *jobStore) JobDir(id string) (string, error) {
	if !job.ValidID(id) {
		return "", job.NotFound(id)
	}
	return filepath.Join(s.dir, "jobs", id), nil
}

// WriteFile writes data to the job's file name atomically and durably.
func (s *jobStore) WriteFile(id, name string, data []byte) error {
	dir, err := s.JobDir(id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("serve: job %s: %w", id, err)
	}
	return writeSynced(filepath.Join(dir, name), data)
}

// ReadFile reads the job's file name.
func (s *jobStore) ReadFile(id, name string) ([]byte, error) {
	dir, err := s.JobDir(id)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("serve: job %s: %w", id, err)
	}
	return b, nil
}

func writeSynced(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, atomicfile.Options{Perm: 0o600, Sync: true}); err != nil {
		return fmt.Errorf("serve: write %s: %w", path, err)
	}
	return nil
}

// encodeLatent returns t's elements as little-endian float32 bytes.
func encodeLatent(t *tensor.Dense) []byte {
	out := make([]byte, 0, 4*len(t.Data))
	for _, v := range t.Data {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	return out
}

// DecodeLatent reads little-endian float32 bytes as a tensor of the given shape.
func DecodeLatent(b []byte, shape []int) (*tensor.Dense, error) {
	n := tensor.NumElements(shape)
	if len(b) != 4*n {
		return nil, fmt.Errorf("serve: latent of %d bytes for shape %v", len(b), shape)
	}
	t := tensor.New(shape...)
	for i := range t.Data {
		t.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return t, nil
}

// syncDir flushes a folder's entries (a rename into it) to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
