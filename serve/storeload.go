package serve

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vdpp/vdpp/serve/job"
)

// The store never destroys what it cannot read. At start-up (openStore) the index
// (DIR/jobs.db) is read by readIndex, which checks every page before it reads it, and
// reconciled with the job folders, each of which holds its job's record (record.json); a
// fresh index is then written and renamed over the old one, so bbolt only ever maps a file
// this process wrote. An index that cannot be read (truncated, corrupt, not an index) is
// moved to DIR/quarantine/ and the jobs come back from their folders; a missing or empty
// index is rebuilt the same way; a record that does not decode is copied there (its job
// recovered from its folder when that copy reads), and a job folder whose record cannot be
// read from either copy is moved there. Every such step is one log line and counts in
// vdpp_store_quarantined_total (vdpp_store_recovered_total for records rebuilt from a
// folder). Nothing start-up reads can crash it.

const (
	indexFile     = "jobs.db"
	recordFile    = "record.json"
	quarantineDir = "quarantine"
	lockFile      = "lock"
)

// errCorruptIndex marks an index file that cannot be read safely.
var errCorruptIndex = errors.New("serve: corrupt job index")

// loadReport is what load found and did.
type loadReport struct {
	Recovered   int // records rebuilt from a job folder
	Migrated    int // folders given the record.json they lacked
	Quarantined int // index files, records and folders set aside
	Finished    int // interrupted deletes completed
}

// quarantine moves path into DIR/quarantine/ under name (made unique with the time) and
// logs why; it never deletes.
func (s *jobStore) quarantine(path, name, why string) error {
	qdir := filepath.Join(s.dir, quarantineDir)
	if err := os.MkdirAll(qdir, 0o755); err != nil {
		return fmt.Errorf("serve: quarantine: %w", err)
	}
	dst := filepath.Join(qdir, name+"."+time.Now().UTC().Format("20060102T150405.000000000"))
	if err := os.Rename(path, dst); err != nil {
		return fmt.Errorf("serve: quarantine %s: %w", path, err)
	}
	s.log.Warn("moved to quarantine", "path", path, "to", dst, "why", why)
	s.report.Quarantined++
	return nil
}

// load reconciles the old index's entries (readIndex) with the job folders (see the
// comment at the top): it returns every record to serve, in submission order, each
// folder's record.json agreeing; openStore writes them to a fresh index. Only openStore
// calls it, before anything can submit.
func (s *jobStore) load(entries [][2][]byte) ([]job.Record, error) {
	// DIR/trash holds deletes in progress: their records go too.
	deleting := map[string]bool{}
	trash := filepath.Join(s.dir, "trash")
	ents, err := os.ReadDir(trash)
	if err != nil {
		return nil, fmt.Errorf("serve: trash: %w", err)
	}
	for _, e := range ents {
		if job.ValidID(e.Name()) {
			deleting[e.Name()] = true
		}
		if err := os.RemoveAll(filepath.Join(trash, e.Name())); err != nil {
			return nil, fmt.Errorf("serve: trash: %w", err)
		}
	}

	// The index: records by id; an undecodable one is set aside.
	indexed := map[string]job.Record{}
	for _, kv := range entries {
		k, v := kv[0], kv[1]
		r, err := job.DecodeRecord(v)
		if err == nil {
			if old, dup := indexed[r.ID]; !dup || r.Rev > old.Rev {
				indexed[r.ID] = r
				continue
			}
			err = fmt.Errorf("a second record of job %s", r.ID)
		}
		name := "record-" + hex.EncodeToString(k)
		if len(name) > 64 {
			name = name[:64]
		}
		if err := os.MkdirAll(filepath.Join(s.dir, quarantineDir), 0o755); err != nil {
			return nil, fmt.Errorf("serve: quarantine: %w", err)
		}
		to := filepath.Join(s.dir, quarantineDir, name+"."+time.Now().UTC().Format("20060102T150405.000000000"))
		if err := writeSynced(to, v); err != nil {
			return nil, err
		}
		s.log.Warn("moved to quarantine", "what", "a job record of the index", "to", to, "why", err.Error())
		s.report.Quarantined++
	}

	// The folders: each record.json against the index.
	out := map[string]job.Record{}
	jobsDir := filepath.Join(s.dir, "jobs")
	ents, err = os.ReadDir(jobsDir)
	if err != nil {
		return nil, fmt.Errorf("serve: job folders: %w", err)
	}
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !job.ValidID(id) {
			continue
		}
		path := filepath.Join(jobsDir, id)
		folder, ferr := s.readFolderRecord(id)
		idx, inIndex := indexed[id]
		switch {
		case deleting[id]:
			// Made again after its delete began (a late write): finish the delete.
			if err := os.RemoveAll(path); err != nil {
				return nil, fmt.Errorf("serve: job %s: %w", id, err)
			}
			continue
		case ferr == nil && inIndex && folder.Rev > idx.Rev:
			out[id] = folder // the folder's copy is newer: the index is rewritten below
		case inIndex:
			out[id] = idx
			if ferr != nil || folder.Rev != idx.Rev {
				if ferr != nil && !errors.Is(ferr, os.ErrNotExist) {
					s.log.Warn("job folder's record unreadable; rewriting it from the index", "id", id, "err", ferr)
				}
				if err := s.writeFolderRecord(idx); err != nil {
					return nil, err
				}
				s.report.Migrated++
			}
		case ferr == nil:
			out[id] = folder
			s.report.Recovered++
			s.log.Info("recovered a job from its folder", "id", id, "state", folder.State)
		default:
			// Neither copy can be read: a submission interrupted before its record, or a
			// folder of an older server whose index is gone. Set it aside, never delete it.
			if err := s.quarantine(path, "job-"+id, fmt.Sprintf("no readable record: %v", ferr)); err != nil {
				return nil, err
			}
		}
		delete(indexed, id)
	}
	// Records without a folder: a text job of an older server (no files), or an
	// interrupted delete.
	for id, r := range indexed {
		if deleting[id] {
			s.report.Finished++ // the fresh index leaves it out
			continue
		}
		out[id] = r
		if err := s.writeFolderRecord(r); err != nil {
			return nil, err
		}
		s.report.Migrated++
	}

	recs := make([]job.Record, 0, len(out))
	for _, r := range out {
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b job.Record) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	// Two jobs recovered with one sequence number (an index rebuilt from folders of two
	// servers): the later gets a fresh one, so the index keeps both.
	var last uint64
	for i := range recs {
		if recs[i].Seq <= last {
			recs[i].Seq = last + 1
			recs[i].Rev++
		}
		last = recs[i].Seq
	}
	return recs, nil
}

// readFolderRecord reads job id's record.json.
func (s *jobStore) readFolderRecord(id string) (job.Record, error) {
	f, err := os.Open(filepath.Join(s.dir, "jobs", id, recordFile))
	if err != nil {
		return job.Record{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return job.Record{}, err
	}
	r, err := job.DecodeRecord(b)
	if err != nil {
		return job.Record{}, err
	}
	if r.ID != id {
		return job.Record{}, fmt.Errorf("%w: the record in folder %s is job %s's", job.ErrBadRecord, id, r.ID)
	}
	return r, nil
}

// writeFolderRecord writes r as its folder's record.json.
func (s *jobStore) writeFolderRecord(r job.Record) error {
	b, err := encodeRecord(r)
	if err != nil {
		return err
	}
	return s.WriteFile(r.ID, recordFile, b)
}

// files says what job id's folder holds (job.CheckRecord).
func (s *jobStore) files(id string) job.Files {
	f := job.Files{LatentBytes: -1}
	dir := filepath.Join(s.dir, "jobs", id)
	if st, err := os.Stat(filepath.Join(dir, inputFile)); err == nil && st.Mode().IsRegular() {
		f.Input = true
	}
	if st, err := os.Stat(filepath.Join(dir, lastInputFile)); err == nil && st.Mode().IsRegular() {
		f.LastInput = true
	}
	if st, err := os.Stat(filepath.Join(dir, finalFile)); err == nil && st.Mode().IsRegular() {
		f.LatentBytes = st.Size()
	}
	return f
}

// logReport logs what load did, when it did anything.
func logReport(log *slog.Logger, r loadReport) {
	if r != (loadReport{}) {
		log.Info("job store checked", "recovered", r.Recovered, "migrated", r.Migrated, "quarantined", r.Quarantined, "deletes_finished", r.Finished)
	}
}
