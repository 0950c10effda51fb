// Package loadtest drives a vdpp server (`vdpp serve`) with concurrent clients for a bounded
// time and reports latency percentiles, throughput and errors; it can verify every output
// against a one-process run with the same seed, and kill worker ranks while it runs.
//
// Contract: it only talks to loopback servers. Every job the server accepted (202) is
// followed to its end (through restarts of the server: connection errors are retried until
// the drain deadline); an accepted job that never ends is counted in "lost". Latency is
// measured from the submission to the client seeing the final state.
package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/httpapi"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// ErrNotLoopback: the load test refuses servers beyond loopback.
var ErrNotLoopback = errors.New("loadtest: the server must be on loopback")

// Options configure a run.
type Options struct {
	URL      string
	Clients  int
	Duration time.Duration
	// Params is the JSON parameter template of every job; each job's seed is unique.
	Params string
	Token  string
	Verify bool
	// KillEvery, when > 0, kills one worker rank (round robin) at this interval: through
	// the pids in KillPidFile when set (SIGKILL), else the server's admin endpoint.
	KillEvery   time.Duration
	KillPidFile string
	// Drain bounds the wait for accepted jobs after Duration (default 2 minutes).
	Drain time.Duration
	// Model is what --verify re-runs (synthetic, no step cost).
	Model  serve.ModelSpec
	Client *http.Client
	Log    *slog.Logger
}

// DefaultParams is the job of the load test unless told otherwise: 2 frames of 16x16
// (latent [1,2,4,2,2]), 8 steps, no guidance.
const DefaultParams = `{"num_frames":2,"steps":8,"height":16,"width":16,"max_guidance":1}`

// Report is the result (also written as JSON).
type Report struct {
	URL                string   `json:"url"`
	Clients            int      `json:"clients"`
	DurationS          float64  `json:"duration_s"`
	Params             string   `json:"params"`
	Submitted          int      `json:"submitted"`
	Completed          int      `json:"completed"`
	Failed             int      `json:"failed"`
	Cancelled          int      `json:"cancelled"`
	Rejected429        int      `json:"rejected_429"`
	Lost               int      `json:"lost"`
	TransportErrors    int      `json:"transport_errors"`
	OtherRejections    int      `json:"other_rejections"`
	P50MS              float64  `json:"p50_ms"`
	P95MS              float64  `json:"p95_ms"`
	P99MS              float64  `json:"p99_ms"`
	MaxMS              float64  `json:"max_ms"`
	ThroughputJobsPerS float64  `json:"throughput_jobs_per_s"`
	CompletedInWindow  int      `json:"completed_in_window"`
	Kills              int      `json:"kills"`
	JobRestarts        int      `json:"job_restarts"`
	OutputsVerified    *int     `json:"outputs_verified,omitempty"`
	OutputsMismatched  *int     `json:"outputs_mismatched,omitempty"`
	Errors             []string `json:"errors,omitempty"`
}

// accepted is one accepted submission.
type accepted struct {
	id        string
	seed      int64
	img       []byte
	submitted time.Time
	done      time.Time
	state     job.State
	restarts  int
}

type runner struct {
	o       Options
	base    *url.URL
	client  *http.Client
	start   time.Time
	end     time.Time
	drainBy time.Time
	seed    atomic.Int64

	mu       sync.Mutex
	jobs     []*accepted
	rejected int
	other    int
	trans    int
	errs     []string
}

// Run drives the server for o.Duration and returns the report.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Clients < 1 || o.Duration <= 0 {
		return Report{}, fmt.Errorf("loadtest: need --clients >= 1 and --duration > 0")
	}
	if o.Params == "" {
		o.Params = DefaultParams
	}
	if o.Drain <= 0 {
		o.Drain = 2 * time.Minute
	}
	if o.Model.Name == "" {
		o.Model.Name = family.Simulator
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	base, err := url.Parse(strings.TrimRight(o.URL, "/"))
	if err != nil || base.Scheme != "http" {
		return Report{}, fmt.Errorf("loadtest: bad --url %q", o.URL)
	}
	if err := checkLoopback(base.Hostname()); err != nil {
		return Report{}, err
	}
	var tmpl map[string]any
	if err := json.Unmarshal([]byte(o.Params), &tmpl); err != nil {
		return Report{}, fmt.Errorf("loadtest: --params: %w", err)
	}
	r := &runner{o: o, base: base, client: o.Client}
	if r.client == nil {
		r.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * o.Clients}}
	}
	r.start = time.Now()
	r.end = r.start.Add(o.Duration)
	r.drainBy = r.end.Add(o.Drain)
	var wg sync.WaitGroup
	for c := 0; c < o.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client1(ctx, tmpl)
		}()
	}
	kills := 0
	if o.KillEvery > 0 {
		stop := make(chan struct{})
		var kw sync.WaitGroup
		kw.Add(1)
		go func() {
			defer kw.Done()
			kills = r.killer(ctx, stop)
		}()
		wg.Wait()
		close(stop)
		kw.Wait()
	} else {
		wg.Wait()
	}
	rep := r.report()
	rep.Kills = kills
	if o.Verify {
		ok, bad, err := r.verify(ctx)
		if err != nil {
			return rep, err
		}
		rep.OutputsVerified, rep.OutputsMismatched = &ok, &bad
	}
	return rep, nil
}

func checkLoopback(host string) error {
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %q", ErrNotLoopback, host)
	}
	return nil
}

func (r *runner) errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

// client1 is one client: submit, follow to the end, repeat until the duration is over.
func (r *runner) client1(ctx context.Context, tmpl map[string]any) {
	for time.Now().Before(r.end) && ctx.Err() == nil {
		seed := r.seed.Add(1)
		p := map[string]any{}
		for k, v := range tmpl {
			p[k] = v
		}
		p["seed"] = seed
		params, _ := json.Marshal(p)
		img := TestImage(seed)
		t0 := time.Now()
		id, retry, err := r.submit(ctx, img, params)
		switch {
		case err != nil:
			r.mu.Lock()
			r.trans++
			r.mu.Unlock()
			r.errorf("submit: %v", err)
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		case retry > 0:
			r.mu.Lock()
			r.rejected++
			r.mu.Unlock()
			sleepCtx(ctx, min(retry, 500*time.Millisecond))
			continue
		case id == "":
			r.mu.Lock()
			r.other++
			r.mu.Unlock()
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		j := &accepted{id: id, seed: seed, img: img, submitted: t0}
		r.mu.Lock()
		r.jobs = append(r.jobs, j)
		r.mu.Unlock()
		r.follow(ctx, j)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (r *runner) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.base.String()+path, body)
	if err != nil {
		return nil, err
	}
	if r.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.o.Token)
	}
	return req, nil
}

// submit posts one job: it returns the id (202), a retry delay (429), or neither (another
// refusal, logged).
func (r *runner) submit(ctx context.Context, img, params []byte) (string, time.Duration, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormField("params")
	fw.Write(params)
	fw, _ = mw.CreateFormFile("image", "in.png")
	fw.Write(img)
	mw.Close()
	req, err := r.newRequest(ctx, "POST", "/v1/videos", &buf)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := r.client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusAccepted:
		var st job.Status
		if err := json.Unmarshal(b, &st); err != nil || st.ID == "" {
			return "", 0, fmt.Errorf("202 without a job id: %s", b)
		}
		return st.ID, 0, nil
	case http.StatusTooManyRequests:
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return "", time.Duration(max(s, 1)) * time.Second, nil
	}
	r.errorf("submit: %d %s", resp.StatusCode, bytes.TrimSpace(b))
	return "", 0, nil
}

// follow waits for the job's final state over server-sent events, reconnecting (the server
// may be restarting) until the drain deadline.
func (r *runner) follow(ctx context.Context, j *accepted) {
	for time.Now().Before(r.drainBy) && ctx.Err() == nil {
		st, err := r.events(ctx, j.id)
		if err == nil && st.State.Final() {
			j.done, j.state, j.restarts = time.Now(), st.State, st.Restarts
			return
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// events reads the job's event stream until its "done" event or an error.
func (r *runner) events(ctx context.Context, id string) (job.Status, error) {
	ctx, cancel := context.WithDeadline(ctx, r.drainBy)
	defer cancel()
	req, err := r.newRequest(ctx, "GET", "/v1/videos/"+id+"/events", nil)
	if err != nil {
		return job.Status{}, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return job.Status{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return job.Status{}, fmt.Errorf("events %s: %d %s", id, resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var last job.Status
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(d), &last); err != nil {
				return last, err
			}
			if last.State.Final() {
				return last, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return last, err
	}
	return last, io.ErrUnexpectedEOF
}

// killer kills one rank every KillEvery, round robin, until stop.
func (r *runner) killer(ctx context.Context, stop <-chan struct{}) int {
	t := time.NewTicker(r.o.KillEvery)
	defer t.Stop()
	kills := 0
	for next := 0; ; {
		select {
		case <-stop:
			return kills
		case <-ctx.Done():
			return kills
		case <-t.C:
		}
		if time.Now().After(r.end) {
			return kills
		}
		rank, err := r.kill(ctx, next)
		if err != nil {
			r.errorf("kill: %v", err)
			continue
		}
		r.o.Log.Info("killed a worker", "rank", rank)
		kills++
		next = rank + 1
	}
}

func (r *runner) kill(ctx context.Context, want int) (int, error) {
	if r.o.KillPidFile != "" {
		b, err := os.ReadFile(r.o.KillPidFile)
		if err != nil {
			return 0, err
		}
		type rp struct{ rank, pid int }
		var ranks []rp
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var x rp
			if n, _ := fmt.Sscan(line, &x.rank, &x.pid); n == 2 && x.pid > 0 {
				ranks = append(ranks, x)
			}
		}
		if len(ranks) == 0 {
			return 0, fmt.Errorf("no worker pids in %s", r.o.KillPidFile)
		}
		sort.Slice(ranks, func(i, j int) bool { return ranks[i].rank < ranks[j].rank })
		pick := ranks[0]
		for _, x := range ranks {
			if x.rank >= want {
				pick = x
				break
			}
		}
		return pick.rank, syscall.Kill(pick.pid, syscall.SIGKILL)
	}
	req, err := r.newRequest(ctx, "GET", "/v1/admin/workers", nil)
	if err != nil {
		return 0, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	var ws []httpapi.WorkerInfo
	err = json.NewDecoder(resp.Body).Decode(&ws)
	resp.Body.Close()
	if err != nil || len(ws) == 0 {
		return 0, fmt.Errorf("list workers: %v", err)
	}
	rank := want % len(ws)
	req, err = r.newRequest(ctx, "POST", fmt.Sprintf("/v1/admin/workers/%d/kill", rank), nil)
	if err != nil {
		return 0, err
	}
	resp, err = r.client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return 0, fmt.Errorf("kill rank %d: %d", rank, resp.StatusCode)
	}
	return rank, nil
}

func (r *runner) report() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := Report{URL: r.o.URL, Clients: r.o.Clients, DurationS: r.o.Duration.Seconds(), Params: r.o.Params,
		Submitted: len(r.jobs), Rejected429: r.rejected, TransportErrors: r.trans, OtherRejections: r.other, Errors: r.errs}
	var lat []float64
	for _, j := range r.jobs {
		rep.JobRestarts += j.restarts
		switch j.state {
		case job.StateSucceeded:
			rep.Completed++
			lat = append(lat, float64(j.done.Sub(j.submitted).Microseconds())/1000)
			if !j.done.After(r.end) {
				rep.CompletedInWindow++
			}
		case job.StateFailed:
			rep.Failed++
		case job.StateCancelled:
			rep.Cancelled++
		default:
			rep.Lost++
		}
	}
	sort.Float64s(lat)
	rep.P50MS, rep.P95MS, rep.P99MS = Percentile(lat, 50), Percentile(lat, 95), Percentile(lat, 99)
	if len(lat) > 0 {
		rep.MaxMS = lat[len(lat)-1]
	}
	rep.ThroughputJobsPerS = float64(rep.CompletedInWindow) / r.o.Duration.Seconds()
	return rep
}

// Percentile returns the p-th percentile of sorted values by linear interpolation between
// closest ranks (numpy's default); 0 for no values.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := p / 100 * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i] + f*(sorted[i+1]-sorted[i])
}

// verify downloads every completed job's final latent and compares it, bit for bit, with
// a one-process run (serve.Reference) of the same image, parameters and seed.
func (r *runner) verify(ctx context.Context) (ok, bad int, err error) {
	spec := r.o.Model
	spec.StepMS = 0
	gen, err := serve.OpenModel(spec)
	if err != nil {
		return 0, 0, err
	}
	defer gen.Close()
	for _, j := range r.jobs {
		if j.state != job.StateSucceeded {
			continue
		}
		p, err := gen.ParseParams([]byte(r.o.Params), job.Limits{})
		if err != nil {
			return ok, bad, err
		}
		p.Seed = j.seed
		img, _, err := image.Decode(bytes.NewReader(j.img))
		if err != nil {
			return ok, bad, err
		}
		want, err := serve.Reference(ctx, spec, gen, family.Input{Image: img}, p)
		if err != nil {
			return ok, bad, err
		}
		got, err := r.latent(ctx, j.id)
		if err != nil {
			r.errorf("verify %s: %v", j.id, err)
			bad++
			continue
		}
		if tensor.BitEqual(got, want) {
			ok++
		} else {
			r.errorf("verify %s: output differs from the one-process run (max diff %g)", j.id, tensor.MaxAbsDiff(got, want))
			bad++
		}
	}
	return ok, bad, nil
}

func (r *runner) latent(ctx context.Context, id string) (*tensor.Dense, error) {
	req, err := r.newRequest(ctx, "GET", "/v1/videos/"+id+"/content?format=latent", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	var shape []int
	for _, f := range strings.Split(resp.Header.Get("X-Latent-Shape"), ",") {
		d, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("bad X-Latent-Shape %q", resp.Header.Get("X-Latent-Shape"))
		}
		shape = append(shape, d)
	}
	return serve.DecodeLatent(b, shape)
}

// TestImage is the small PNG a client uploads for seed: a 16x16 gradient tinted by seed.
func TestImage(seed int64) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 16, 16))
	for y := 0; y < 16; y++ {
		for x := 0; x < 16; x++ {
			img.Set(x, y, color.NRGBA{uint8(16*x + int(seed)), uint8(16*y + 3*int(seed)), uint8(5 * seed), 255})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	return buf.Bytes()
}

// WriteJSON writes the report to path.
func WriteJSON(path string, rep Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
