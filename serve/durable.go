package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/vdpp/vdpp/serve/dispatch"
	"github.com/vdpp/vdpp/serve/job"
)

// Retries of store writes. A job's output is retried outputAttempts times (about 3 s)
// before the job fails; an end record (failed, cancelled, succeeded) is retried until it
// lands or the server closes, and the end is reported only once it has landed. A submission
// is retried submitAttempts times while its client waits.
const (
	retryBase      = 20 * time.Millisecond
	retryMax       = 2 * time.Second
	outputAttempts = 8
	submitAttempts = 3
	// cancelWait bounds how long DELETE waits for the cancellation to be durable.
	cancelWait = 10 * time.Second
	// probeEvery bounds how often the data dir is probed while storage is failing.
	probeEvery = time.Second
)

// retryDelay is the wait before retry number attempt (0 = the first retry): retryBase
// doubled per attempt, at most retryMax. retryDelay is pure.
func retryDelay(attempt int) time.Duration {
	if attempt >= 16 {
		return retryMax
	}
	return min(retryBase<<attempt, retryMax)
}

// storageError wraps a store failure as ErrStorage (keeping the cause for errors.Is, e.g.
// syscall.ENOSPC).
func storageError(err error) error {
	if err == nil || errors.Is(err, job.ErrStorage) {
		return err
	}
	return fmt.Errorf("%w: %w", job.ErrStorage, err)
}

// isDiskFull reports whether err is a full disk or quota (HTTP 507).
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// storeHealth remembers whether the last store write failed; /readyz and submissions
// consult it, and a successful write or probe clears it.
type storeHealth struct {
	mu      sync.Mutex
	failing bool
	lastErr error
	probed  time.Time
}

func (h *storeHealth) report(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing = err != nil
	h.lastErr = err
}

// ok reports whether storage works, probing with probe (at most every probeEvery) while
// it is known to fail. It returns the last error when it does not.
func (h *storeHealth) ok(now time.Time, probe func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		return nil
	}
	if now.Sub(h.probed) >= probeEvery {
		h.probed = now
		if err := probe(); err == nil {
			h.failing, h.lastErr = false, nil
			return nil
		} else {
			h.lastErr = err
		}
	}
	return storageError(h.lastErr)
}

// retry runs op until it succeeds, attempts times (0: until the coordinator closes),
// waiting retryDelay between tries. Every failure is logged and marks storage unhealthy;
// a success marks it healthy.
func (c *coordinator) retry(what string, attempts int, op func() error) error {
	for a := 0; ; a++ {
		err := op()
		c.health.report(err)
		if err == nil {
			return nil
		}
		c.cfg.Log.Error("store write failed", "what", what, "attempt", a+1, "err", err)
		if attempts > 0 && a+1 >= attempts {
			return storageError(err)
		}
		select {
		case <-c.closing:
			return storageError(err)
		case <-time.After(retryDelay(a)):
		}
	}
}

// writeRecord performs actPersist: it writes j's latest record (the one the dispatcher
// holds when the write starts; io.wmu serialises a job's writes, so the store never goes
// back to an older record) and feeds the outcome back (dispatcher.recordSaved). It runs
// counted in wg, so Close waits for it.
func (c *coordinator) writeRecord(j *dispatch.Job, io *jobIO) {
	defer c.wg.Done()
	io.wmu.Lock()
	c.mu.Lock()
	rec, ver := c.d.Record(j)
	c.mu.Unlock()
	err := c.retry("job record "+rec.ID, 0, func() error { return c.cfg.Store.Put(rec) })
	io.wmu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.d.RecordSaved(j, ver, err)
	c.flushLocked()
}

// waitSaved waits until j's record of version ver (or a later one) has landed, at most
// timeout. It fails with ErrStorage when it has not by then, ErrClosed when the server
// closes first.
func (c *coordinator) waitSaved(j *dispatch.Job, ver uint64, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		if j.SavedVersion() >= ver {
			c.mu.Unlock()
			return nil
		}
		io := c.ioLocked(j)
		if io.saved == nil {
			io.saved = make(chan struct{})
		}
		ch := io.saved
		id := j.ID()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return fmt.Errorf("%w: job %s not written within %v", job.ErrStorage, id, timeout)
		case <-c.closing:
			return job.ErrClosed
		}
	}
}

// StorageOK reports whether the data dir is writable (nil), probing it while writes are
// failing.
func (c *coordinator) StorageOK() error {
	return c.health.ok(c.cfg.Now(), c.cfg.Store.Probe)
}

// probeFile is written and removed by jobStore.Probe.
const probeFile = ".probe"

// Probe checks that the store can write job files: it writes, syncs and removes a small
// file in DIR/jobs.
func (s *jobStore) Probe() error {
	path := filepath.Join(s.dir, "jobs", probeFile)
	if err := writeSynced(path, []byte("ok\n")); err != nil {
		return err
	}
	return os.Remove(path)
}
