package serve

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

var jobsBucket = []byte("jobs")

// jobStore keeps job records in a bbolt database (DIR/jobs.db) and each job's files under
// DIR/jobs/ID/: input.img (the uploaded image), final.f32 (the final latent, little-endian
// float32) and rendered outputs. Files are written to a temporary name, synced and renamed
// before the record that points at them is committed. A deleted job's folder is first
// renamed into DIR/trash/ (so its files vanish at once) and removed there, then its record
// is deleted (see RemoveFiles and Delete).
type jobStore struct {
	db  *bolt.DB
	dir string
}

// openStore opens (creating) the store under dir. Only one process may hold it.
func openStore(dir string) (*jobStore, error) {
	for _, sub := range []string{"jobs", "trash"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("serve: data dir: %w", err)
		}
	}
	db, err := bolt.Open(filepath.Join(dir, "jobs.db"), 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("serve: open %s: %w (is another server using this --data-dir?)", filepath.Join(dir, "jobs.db"), err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(jobsBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("serve: init store: %w", err)
	}
	return &jobStore{db: db, dir: dir}, nil
}

// Close closes the database.
func (s *jobStore) Close() error { return s.db.Close() }

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// Put writes rec (keyed by its sequence number, so All returns submission order). Concurrent
// Puts are committed together (bbolt's Batch), each returning once durable.
func (s *jobStore) Put(rec job.Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("serve: encode job %s: %w", rec.ID, err)
	}
	err = s.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(jobsBucket).Put(seqKey(rec.Seq), b) })
	if err != nil {
		return fmt.Errorf("serve: store job %s: %w", rec.ID, err)
	}
	return nil
}

// All returns every record in submission order.
func (s *jobStore) All() ([]job.Record, error) {
	var out []job.Record
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(jobsBucket).ForEach(func(k, v []byte) error {
			var r job.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("serve: job record %x: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, err
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
			if err := json.Unmarshal(v, &have); err != nil {
				return fmt.Errorf("serve: job record %d: %w", r.Seq, err)
			}
			if have.ID != r.ID {
				continue
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

// RemoveOrphans empties DIR/trash and deletes every job folder under DIR/jobs whose id
// known reports false (files whose record was never committed or was deleted by an
// interrupted run). Only call it while nothing can create a job: a submission writes its
// folder before its record. It returns how many job folders it removed.
func (s *jobStore) RemoveOrphans(known func(id string) bool) (int, error) {
	var errs []error
	trash := filepath.Join(s.dir, "trash")
	ents, err := os.ReadDir(trash)
	if err != nil {
		return 0, fmt.Errorf("serve: trash: %w", err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(trash, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("serve: trash: %w", err))
		}
	}
	ents, err = os.ReadDir(filepath.Join(s.dir, "jobs"))
	if err != nil {
		return 0, fmt.Errorf("serve: job folders: %w", err)
	}
	n := 0
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !job.ValidID(id) || known(id) {
			continue
		}
		if err := s.RemoveFiles(id); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
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
