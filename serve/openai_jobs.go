package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vdpp/vdpp/serve/job"
)

// Page returns up to limit jobs in submission order (newest first when desc) that come
// after the job with id after ("" starts at the beginning), and whether more follow. An
// after id the server does not hold is ErrNotFound.
func (c *coordinator) Page(after string, limit int, desc bool) ([]job.Status, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.Page(after, limit, desc, c.cfg.Now())
}

// deletePoll is how often Delete looks whether a cancelled job's last record write landed.
const deletePoll = 10 * time.Millisecond

// Delete deletes job id now, as Expire does at its term: a queued or running job is
// cancelled first and Delete waits (at most wait, or until ctx ends) until it has ended
// and its record is written; then the job leaves memory (every route answers 404), its
// files go and then its record. An unknown id is ErrNotFound; after Close, ErrClosed.
func (c *coordinator) Delete(ctx context.Context, id string, wait time.Duration) error {
	if _, err := c.Cancel(id); err != nil && !errors.Is(err, job.ErrFinished) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	notify, stop, err := c.Subscribe(id)
	if err != nil {
		return err
	}
	defer stop()
	tick := time.NewTicker(deletePoll)
	defer tick.Stop()
	for {
		c.mu.Lock()
		rec, done, err := c.d.Remove(id)
		c.flushLocked()
		if err != nil {
			c.mu.Unlock()
			return err
		}
		if done {
			c.wg.Add(1)
			c.mu.Unlock()
			defer c.wg.Done()
			ferr := c.cfg.Store.RemoveFiles(id)
			if err := c.cfg.Store.Delete([]job.Record{rec}); err != nil {
				c.mu.Lock()
				c.unreaped = append(c.unreaped, rec) // the next sweep retries
				c.mu.Unlock()
				return err
			}
			return ferr
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: job %s did not stop within %v: %v", job.ErrNotReady, id, wait, ctx.Err())
		case <-notify:
		case <-tick.C:
		}
	}
}
