package serve

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/video"
)

func TestDecodedBytes(t *testing.T) {
	for _, c := range []struct {
		model color.Model
		want  int64
	}{
		{color.RGBA64Model, 8 * 4096 * 4096}, {color.NRGBA64Model, 8 * 4096 * 4096},
		{color.NRGBAModel, 4 * 4096 * 4096}, {color.GrayModel, 4096 * 4096},
		{color.Gray16Model, 2 * 4096 * 4096}, {color.YCbCrModel, 3 * 4096 * 4096},
		{color.Palette{color.Black, color.White}, 4096 * 4096}, {nil, 8 * 4096 * 4096},
	} {
		if got := decodedBytes(image.Config{ColorModel: c.model, Width: 4096, Height: 4096}); got != c.want {
			t.Errorf("decodedBytes(%T) = %d, want %d", c.model, got, c.want)
		}
	}
}

// TestByteBudget: acquisitions over the budget wait in order; a cancelled wait gives up its
// place; one request larger than the budget runs alone.
func TestByteBudget(t *testing.T) {
	b := newByteBudget(100)
	ctx := context.Background()
	if err := b.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	// waiting returns once n requests wait in line.
	waiting := func(n int) {
		t.Helper()
		var k int
		if !wait.For(10*time.Second, func() bool {
			b.mu.Lock()
			k = len(b.waiters)
			b.mu.Unlock()
			return k == n
		}) {
			t.Fatalf("%d requests wait, want %d", k, n)
		}
	}
	got := make(chan int64, 3)
	go func() { b.acquire(ctx, 50); got <- 50 }()
	waiting(1)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- b.acquire(cctx, 10) }()
	waiting(2) // the small request waits behind the large one, though it would fit
	select {
	case n := <-got:
		t.Fatalf("acquired %d over the budget", n)
	case err := <-errc:
		t.Fatalf("a later small request went ahead of the line: %v", err)
	default:
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	b.release(60)
	if n := <-got; n != 50 {
		t.Fatal(n)
	}
	b.release(50)
	if err := b.acquire(ctx, 1000); err != nil { // larger than the budget: alone
		t.Fatal(err)
	}
	if b.used != 100 {
		t.Fatalf("used %d, want the whole budget", b.used)
	}
	b.release(1000)
	if b.used != 0 || len(b.waiters) != 0 {
		t.Fatalf("left used %d, %d waiters", b.used, len(b.waiters))
	}
}

// TestDecodeImageConfigFirst: an image over the pixel limit is refused from its header (the
// pixels of this one are truncated away, so decoding them would fail differently).
func TestDecodeImageConfigFirst(t *testing.T) {
	img := image.NewRGBA64(image.Rect(0, 0, 300, 200))
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	head := buf.Bytes()[:60] // signature and IHDR only
	if _, _, err := decodeImage(context.Background(), head, 300*200-1); !errors.Is(err, job.ErrTooLarge) {
		t.Fatalf("oversize header: %v, want ErrTooLarge", err)
	}
	if _, _, err := decodeImage(context.Background(), head, 0); !errors.Is(err, video.ErrNotImage) {
		t.Fatalf("truncated pixels: %v, want ErrNotImage", err)
	}
	m, release, err := decodeImage(context.Background(), buf.Bytes(), 300*200)
	if err != nil || m.Bounds().Dx() != 300 {
		t.Fatalf("good image: %v", err)
	}
	release()
	release() // once
	if decodeBudget.used != 0 {
		t.Fatalf("budget still holds %d bytes", decodeBudget.used)
	}
}

// TestRenderShared: concurrent first downloads of one job (both formats) share one render.
func TestRenderShared(t *testing.T) {
	ts := startServer(t, Config{NProc: 1})
	st := ts.submit(testPNG(t, 1), `{"num_frames":2,"steps":2,"height":16,"width":16}`)
	if st = ts.wait(st.ID, 10*time.Second); st.State != job.StateSucceeded {
		t.Fatal(st.State)
	}
	var wg sync.WaitGroup
	bodies := make([][]byte, 12)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/v1/videos/" + st.ID + "/content"
			if i%2 == 1 {
				path += "?format=gif"
			}
			resp, b := ts.do("GET", path, nil, "")
			if resp.StatusCode != http.StatusOK {
				t.Errorf("download: %d %s", resp.StatusCode, b)
			}
			bodies[i] = b
		}()
	}
	wg.Wait()
	for i := 2; i < len(bodies); i++ {
		if !bytes.Equal(bodies[i], bodies[i%2]) {
			t.Errorf("download %d differs", i)
		}
	}
	_, mb := ts.do("GET", "/metrics", nil, "")
	if n := countLine(string(mb), "vdpp_renders_total"); n != 1 {
		t.Errorf("vdpp_renders_total %v, want 1", n)
	}
}
