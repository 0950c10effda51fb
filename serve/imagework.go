package serve

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/video"
)

// decodeBudget bounds the memory of image decodes in flight in this process (uploads being
// checked, jobs being prepared): a decode reserves its image's decoded size first, so 24
// concurrent uploads of a small PNG that decodes to 4096x4096x16-bit (128 MB each) wait
// for each other instead of taking 3 GB at once. One decode larger than the whole budget
// still runs, alone.
var decodeBudget = newByteBudget(256 << 20)

// decodedBytes estimates the memory of decoding an image with config cfg: width x height x
// the bytes per pixel of its colour model (8 when unknown). decodedBytes is pure.
func decodedBytes(cfg image.Config) int64 {
	per := int64(8)
	switch cfg.ColorModel {
	case color.GrayModel, color.AlphaModel:
		per = 1
	case color.Gray16Model, color.Alpha16Model:
		per = 2
	case color.YCbCrModel:
		per = 3 // 4:4:4 at most
	case color.NYCbCrAModel, color.RGBAModel, color.NRGBAModel, color.CMYKModel:
		per = 4
	case color.RGBA64Model, color.NRGBA64Model:
		per = 8
	default:
		if _, ok := cfg.ColorModel.(color.Palette); ok {
			per = 1
		}
	}
	return int64(cfg.Width) * int64(cfg.Height) * per
}

// decodeImage decodes a PNG or JPEG: its header first (refusing more than maxPixels
// pixels, 0 = no limit, before any pixel is decoded), then the pixels within
// decodeBudget. The image's share of the budget is held until release is called: call it
// once the image is no longer used (its memory is then garbage).
func decodeImage(ctx context.Context, data []byte, maxPixels int) (img image.Image, release func(), err error) {
	cfg, err := imageConfig(data, maxPixels)
	if err != nil {
		return nil, nil, err
	}
	n := decodedBytes(cfg)
	if err := decodeBudget.acquire(ctx, n); err != nil {
		return nil, nil, err
	}
	var once sync.Once
	release = func() { once.Do(func() { decodeBudget.release(n) }) }
	img, _, err = image.Decode(bytes.NewReader(data))
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("%w: %v", video.ErrNotImage, err)
	}
	return img, release, nil
}

// imageConfig reads the header of a PNG or JPEG, refusing an empty image and one of more
// than maxPixels pixels (0 = no limit).
func imageConfig(data []byte, maxPixels int) (image.Config, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || (format != "png" && format != "jpeg") {
		return image.Config{}, fmt.Errorf("%w: the image part is not a PNG or JPEG image", video.ErrNotImage)
	}
	if cfg.Width < 1 || cfg.Height < 1 {
		return image.Config{}, fmt.Errorf("%w: the image is empty", video.ErrNotImage)
	}
	if maxPixels > 0 && int64(cfg.Width)*int64(cfg.Height) > int64(maxPixels) {
		return image.Config{}, fmt.Errorf("%w: image %dx%d has more than %d pixels (--max-image-pixels): resize it first", job.ErrTooLarge, cfg.Width, cfg.Height, maxPixels)
	}
	return cfg, nil
}

// byteBudget is a weighted semaphore: acquire(n) waits until n bytes (at most the whole
// budget) are free, first come first served.
type byteBudget struct {
	mu      sync.Mutex
	total   int64
	used    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newByteBudget(total int64) *byteBudget { return &byteBudget{total: total} }

func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.total)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.total {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.used -= n
			b.grantLocked()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grantLocked()
		}
		return ctx.Err()
	}
}

func (b *byteBudget) release(n int64) {
	n = min(n, b.total)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.grantLocked()
}

// grantLocked wakes the waiters at the head of the line that now fit.
func (b *byteBudget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.total {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

// renderFlights makes concurrent first downloads of one job share one render (decode and
// write of its GIF and MP4) instead of each running its own.
type renderFlights struct {
	mu      sync.Mutex
	calls   map[string]*renderCall
	renders prometheus.Counter
}

type renderCall struct {
	done chan struct{}
	err  error
}

func (f *renderFlights) init(m *metricSet) {
	f.calls = map[string]*renderCall{}
	f.renders = prometheus.NewCounter(prometheus.CounterOpts{Name: "vdpp_renders_total",
		Help: "Renders (decode and write of a finished job's GIF and MP4; concurrent first downloads share one)."})
	m.reg.MustRegister(f.renders)
}

// do runs render for job id, or, when one is already running, waits for its result (or for
// ctx, the waiting client's request).
func (f *renderFlights) do(ctx context.Context, id string, render func() error) error {
	f.mu.Lock()
	if c, ok := f.calls[id]; ok {
		f.mu.Unlock()
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c := &renderCall{done: make(chan struct{})}
	f.calls[id] = c
	f.mu.Unlock()
	f.renders.Inc()
	c.err = render()
	f.mu.Lock()
	delete(f.calls, id)
	f.mu.Unlock()
	close(c.done)
	return c.err
}
