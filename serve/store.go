package serve

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/vdpp/vdpp/tensor"
)

// ErrNotFound is returned for a job id the server does not know.
var ErrNotFound = errors.New("serve: no such job")

var jobsBucket = []byte("jobs")

// idPattern is what a job id looks like; anything else never reaches the file system.
var idPattern = regexp.MustCompile(`^[0-9a-f]{16,64}$`)

// State is a job's lifecycle state.
type State string

// Job states. Queued and running jobs resume after a restart; the others are final.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
)

// Final reports whether s is a terminal state.
func (s State) Final() bool { return s == StateSucceeded || s == StateFailed || s == StateCancelled }

// Record is the persisted part of a job.
type Record struct {
	ID          string     `json:"id"`
	Seq         uint64     `json:"seq"`
	State       State      `json:"state"`
	Params      Params     `json:"params"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Error       string     `json:"error,omitempty"`
	LatentShape []int      `json:"latent_shape,omitempty"`
	// Restarts counts how often the job's work was resumed after a worker loss or a
	// server restart.
	Restarts int `json:"restarts,omitempty"`
}

// Store keeps job records in a bbolt database (DIR/jobs.db) and each job's files under
// DIR/jobs/ID/: input.img (the uploaded image), final.f32 (the final latent, little-endian
// float32) and rendered outputs. Files are written to a temporary name, synced and renamed
// before the record that points at them is committed.
type Store struct {
	db  *bolt.DB
	dir string
}

// OpenStore opens (creating) the store under dir. Only one process may hold it.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "jobs"), 0o755); err != nil {
		return nil, fmt.Errorf("serve: data dir: %w", err)
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
	return &Store{db: db, dir: dir}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// Put writes rec (keyed by its sequence number, so All returns submission order). Concurrent
// Puts are committed together (bbolt's Batch), each returning once durable.
func (s *Store) Put(rec Record) error {
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
func (s *Store) All() ([]Record, error) {
	var out []Record
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(jobsBucket).ForEach(func(k, v []byte) error {
			var r Record
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

// JobDir is the folder of job id's files.
func (s *Store) JobDir(id string) (string, error) {
	if !idPattern.MatchString(id) {
		return "", fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return filepath.Join(s.dir, "jobs", id), nil
}

// WriteFile writes data to the job's file name atomically and durably.
func (s *Store) WriteFile(id, name string, data []byte) error {
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
func (s *Store) ReadFile(id, name string) ([]byte, error) {
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
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("serve: write %s: %w", path, err)
	}
	return nil
}

// EncodeLatent returns t's elements as little-endian float32 bytes.
func EncodeLatent(t *tensor.Dense) []byte {
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
