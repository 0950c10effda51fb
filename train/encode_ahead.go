package train

import (
	stdcontext "context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vdpp/vdpp/tensor"
)

// encodeAheadSaveEvery is how many newly encoded clips encodeAhead keeps in memory only
// before it rewrites the latent cache, so an interrupted encode loses little.
const encodeAheadSaveEvery = 200

// encodeAhead encodes every training clip 0..count-1 that the cache lacks before training
// starts, with workers concurrent encoders (each its own copy of the frozen networks), and
// writes the latent cache as it goes. Encoding is a pure function of the clip, so the result
// is bit for bit what lazy encoding during the steps gives; only the wall time changes: a
// fresh UNet run otherwise spends its first thousands of steps mostly encoding on one core.
// A cancelled ctx stops it early with what was encoded saved; training then stops too.
func (f *frozen) encodeAhead(ctx stdcontext.Context, count, workers int, progress io.Writer) error {
	var todo []int
	for i := 0; i < count; i++ {
		_, haveL := f.raw[i]
		_, haveE := f.emb[i]
		if !haveL || !haveE {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	workers = max(1, min(workers, len(todo)))
	if progress != nil {
		fmt.Fprintf(progress, "train unet: encoding %d of %d training clips with %d workers\n", len(todo), count, workers)
	}
	start := time.Now()
	jobs := make(chan int)
	var (
		mu       sync.Mutex
		firstErr error
		done     int
	)
	record := func(i int, l, e *tensor.Dense) error {
		mu.Lock()
		defer mu.Unlock()
		f.raw[i], f.emb[i], f.cacheDirty = l, e, true
		done++
		if done%encodeAheadSaveEvery == 0 || done == len(todo) {
			if progress != nil {
				fmt.Fprintf(progress, "train unet: encoded %d/%d clips, %.2fs/clip\n", done, len(todo), time.Since(start).Seconds()/float64(done))
			}
			return f.saveLatentCache()
		}
		return nil
	}
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		enc, cm, err := f.newEncoders()
		if err != nil {
			close(jobs)
			wg.Wait()
			return fmt.Errorf("train: encode ahead: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				// A clip may have one half cached already (a fresh run's scaling factor
				// encodes the first clips' latents only); only the missing half is encoded.
				mu.Lock()
				l, e := f.raw[i], f.emb[i]
				mu.Unlock()
				var err error
				if l == nil {
					if l, err = f.encodeLatents(enc, i); err != nil {
						fail(fmt.Errorf("train: encode clip %d: %w", i, err))
						continue
					}
				}
				if e == nil {
					if e, err = f.encodeEmbedding(cm, i); err != nil {
						fail(fmt.Errorf("train: embed clip %d: %w", i, err))
						continue
					}
				}
				if err := record(i, l, e); err != nil {
					fail(err)
				}
			}
		}()
	}
feed:
	for _, i := range todo {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop {
			break
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return f.saveLatentCache()
}
