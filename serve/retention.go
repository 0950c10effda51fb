package serve

import (
	"errors"
	"time"

	"github.com/vdpp/vdpp/serve/job"
)

// Bounds of the interval between two sweeps for expired jobs.
const (
	minSweepInterval = time.Second
	maxSweepInterval = time.Hour
)

// sweepInterval is how often a server with retention keep looks for expired jobs: a tenth
// of keep, at least a second and at most an hour, so a job outlives keep by at most 10 %
// (or an hour) and a short keep does not make the server sweep in a busy loop. It is 0 when
// keep <= 0 (no sweeps).
func sweepInterval(keep time.Duration) time.Duration {
	if keep <= 0 {
		return 0
	}
	return min(max(keep/10, minSweepInterval), maxSweepInterval)
}

// Expire deletes the jobs ExpiredJobs picks at now among the finished jobs that have no
// record write in flight, and returns how many it deleted. A deleted job is first dropped
// from memory (from then on every route answers 404, exactly as for an id never seen, and
// its event streams end), then its files (RemoveFiles: renamed away at once, then removed),
// then its record. If the process dies in between, the record of an expired job is left
// and the next start's sweep deletes it; nothing visible points at missing files. After
// Close it returns ErrClosed.
func (c *coordinator) Expire(now time.Time, keep time.Duration) (int, error) {
	if keep <= 0 {
		return 0, nil
	}
	c.mu.Lock()
	dead, err := c.d.Expire(now, keep)
	c.flushLocked()
	if err != nil {
		c.mu.Unlock()
		return 0, err
	}
	retry := c.unreaped
	c.unreaped = nil
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()

	var errs []error
	for _, r := range dead {
		if err := c.cfg.Store.RemoveFiles(r.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.cfg.Store.Delete(append(retry, dead...)); err != nil {
		errs = append(errs, err)
		c.mu.Lock()
		c.unreaped = append(c.unreaped, append(retry, dead...)...)
		c.mu.Unlock()
	}
	return len(dead), errors.Join(errs...)
}

// Sweep deletes the jobs expired at Config.Now under Config.KeepJobs (none when it is 0)
// and returns how many; the sweep loop calls it, and New once before the server serves.
func (s *Server) Sweep() (int, error) {
	n, err := s.coord.Expire(s.cfg.Now(), s.cfg.KeepJobs)
	if err != nil && !errors.Is(err, job.ErrClosed) {
		s.log.Error("sweep expired jobs", "err", err)
	}
	return n, err
}

// sweepLoop sweeps on every tick until Close, then calls stop and closes s.swept.
func (s *Server) sweepLoop(tick <-chan time.Time, stop func()) {
	defer close(s.swept)
	defer stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick:
			s.Sweep()
		}
	}
}
