package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vdpp/vdpp/serve/httpapi"
	"github.com/vdpp/vdpp/serve/job"
)

// deleteWait bounds how long a DELETE of the OpenAI API waits for a running job's
// cancellation to land.
const deleteWait = 30 * time.Second

// backend is the server's core as the HTTP layer sees it (httpapi.Backend).
type backend struct{ s *Server }

var _ httpapi.Backend = backend{}

func (b backend) Model() httpapi.Model { return b.s.gen }

func (b backend) ImageSize(data []byte) (int, int, error) {
	return imageSize(data, b.s.cfg.Limits.MaxImagePixels)
}

func (b backend) CheckImage(data []byte, p job.Params) (int64, error) {
	return checkImage(data, b.s.cfg.Limits.MaxImagePixels, b.s.cost, p)
}

func (b backend) CheckCost(p job.Params) error { return b.s.checkCost(p) }

func (b backend) Limits() job.ModelLimits { return b.s.modelLimits() }

// StorageOK says whether a job could be stored now: the store's writes work and the data
// dir has more free space than it keeps.
func (b backend) StorageOK() error {
	if err := b.s.coord.StorageOK(); err != nil {
		return err
	}
	return b.s.diskOK(0)
}

// Submit refuses up front (507) a job whose outputs would leave the data dir with less free
// space than it keeps, rather than accept it and fail it when its output cannot be written.
func (b backend) Submit(p job.Params, in job.Input) (job.Status, error) {
	if err := b.s.checkJobMesh(p); err != nil {
		return job.Status{}, err
	}
	if err := b.s.diskOK(job.DiskBytes(p)); err != nil {
		return job.Status{}, err
	}
	return b.s.coord.SubmitInput(p, in)
}

func (b backend) Status(id string) (job.Status, error) { return b.s.coord.Status(id) }

func (b backend) Cancel(id string) (job.Status, error) { return b.s.coord.Cancel(id) }

func (b backend) Delete(ctx context.Context, id string) error {
	return b.s.coord.Delete(ctx, id, deleteWait)
}

func (b backend) Page(after string, limit int, desc bool) ([]job.Status, bool, error) {
	return b.s.coord.Page(after, limit, desc)
}

func (b backend) Subscribe(id string) (<-chan struct{}, func(), error) {
	return b.s.coord.Subscribe(id)
}

func (b backend) RetryAfter() int { return b.s.coord.RetryAfter() }

func (b backend) Ready() (int, int) { return b.s.coord.Ready() }

func (b backend) Latent(id string) ([]byte, []int, error) { return b.s.latent(id) }

func (b backend) Output(ctx context.Context, id, name string) (string, error) {
	return b.s.output(ctx, id, name)
}

func (b backend) JobFile(id, name string) ([]byte, error) {
	if renderedFile(name) || name == inputFile || name == lastInputFile || name == finalFile {
		return nil, fmt.Errorf("serve: %s is not a job's extra file", name)
	}
	return b.s.store.ReadFile(id, name)
}

// WriteJobFile writes a small file beside job id's outputs. A job deleted meanwhile (by
// another client who found it in the list) has its folder, which the write may have made
// again, removed.
func (b backend) WriteJobFile(id, name string, data []byte) error {
	if renderedFile(name) || name == inputFile || name == lastInputFile || name == finalFile {
		return fmt.Errorf("serve: %s is not a job's extra file", name)
	}
	err := b.s.store.WriteFile(id, name, data)
	if _, serr := b.s.coord.Status(id); errors.Is(serr, job.ErrNotFound) {
		b.s.store.RemoveFiles(id)
	}
	return err
}

func (b backend) Workers() []httpapi.WorkerInfo { return b.s.pool.Workers() }

func (b backend) Kill(rank int) error { return b.s.pool.Kill(rank) }
