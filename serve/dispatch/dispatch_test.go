package dispatch

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// The dispatcher's rules as tables: each case feeds a script of events and compares the
// actions that matter (what is prepared, sent, cancelled, closed, killed, persisted,
// written, forgotten) and the states clients see, as a trace.
//
// Script lines:
//
//	submit J STEPS       a submission (reserve, then its files written)
//	prepared J           J's initial sample is built
//	prepfail J           building J's sample failed
//	join R               rank R connects (again: replaces its connection)
//	lost R               rank R's connection fails
//	progress R B STEP    rank R finished STEP of batch B
//	result R B [ROWS]    rank R returns batch B (ROWS: the rows it returns, default all)
//	dropped R B ROW      rank R dropped ROW of batch B after a cancel
//	empty R B, failed R B
//	cancel J, output J, outfail J (the final latent written, or not), saved J (J's record
//	writes land), wait D (time passes), stalls (the watchdog's tick), expire KEEP,
//	remove J, status J, load J STATE [cancel] (a record at start-up)
//
// Jobs are one letter; their ids are the letter repeated (ValidID wants 16 or more).

type dispatchCase struct {
	name   string
	lim    Limits
	script []string
	want   []string
}

func jobID(name string) string { return strings.Repeat(name, 24) }

// dharness runs scripts against a dispatcher.
type dharness struct {
	t     *testing.T
	d     *Dispatcher
	now   time.Time
	ranks map[int]*Worker
	trace []string
	logs  []string
	seq   uint64
}

func (h *dharness) job(name string) *Job {
	j := h.d.jobs[jobID(name)]
	if j == nil {
		h.t.Fatalf("no job %s", name)
	}
	return j
}

func (h *dharness) batch(rank, id string) (*Worker, *batch) {
	w := h.ranks[atoi(h.t, rank)]
	b := w.outstanding[int64(atoi(h.t, strings.TrimPrefix(id, "b")))]
	return w, b
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("script: %q is not a number", s)
	}
	return n
}

// record appends the actions of the last event that the tables look at.
func (h *dharness) record(err error) {
	for _, a := range h.d.Take() {
		switch a := a.(type) {
		case Log:
			line := a.Msg
			for i := 0; i+1 < len(a.Args); i += 2 {
				line += fmt.Sprintf(" %v=%v", a.Args[i], h.names(fmt.Sprint(a.Args[i+1])))
			}
			h.logs = append(h.logs, h.names(line))
			continue
		case Notify, Saved, Metric, FreeMemory:
			continue
		}
		h.trace = append(h.trace, h.names(a.String()))
	}
	if err != nil {
		h.trace = append(h.trace, "error: "+h.names(err.Error()))
	}
}

// names writes job ids as their letters.
func (h *dharness) names(s string) string {
	for _, f := range strings.Fields(s) {
		if len(f) >= 24 && strings.Count(f, f[:1]) == len(f) {
			s = strings.ReplaceAll(s, f, f[:1])
		}
	}
	return s
}

func (h *dharness) step(line string) {
	t := h.t
	f := strings.Fields(line)
	var err error
	switch f[0] {
	case "submit": // submit NAME STEPS [CLIENT [INPUT_PIXELS]]
		client, pixels := "", int64(0)
		if len(f) > 3 {
			client = f[3]
		}
		if len(f) > 4 {
			pixels = int64(atoi(t, f[4]))
		}
		var seq uint64
		if seq, err = h.d.Reserve(client, h.now); err == nil {
			rec := job.Record{ID: jobID(f[1]), Seq: seq, State: job.StateQueued, CreatedAt: h.now, Client: client, InputPixels: pixels,
				Params: job.Params{Steps: atoi(t, f[2]), NumFrames: 1, Height: 8, Width: 8}}
			_, err = h.d.Submitted(rec, []byte("img"), nil, h.now)
		}
	case "prepared", "prepfail":
		j := h.job(f[1])
		if f[0] == "prepfail" {
			h.d.Prepared(j, nil, errors.New("bad image"), h.now)
			break
		}
		lat := tensor.New(1, 1, 2, 1, 1)
		lat.Data[0] = float32(f[1][0])
		h.d.Prepared(j, &Sample{Latent: lat}, nil, h.now)
	case "join":
		r := atoi(t, f[1])
		w, ok := h.d.Join(r, 100+r, h.now)
		if !ok {
			err = errors.New("join refused")
		}
		h.ranks[r] = w
	case "lost":
		h.d.Lost(h.ranks[atoi(t, f[1])], errors.New("EOF"), h.now)
	case "progress":
		w, b := h.batch(f[1], f[2])
		err = h.d.Message(w, Msg{Op: OpProgress, Batch: idOf(b), Step: atoi(t, f[3]), Compute: 0.001, HasCompute: true}, h.now)
	case "dropped":
		w, b := h.batch(f[1], f[2])
		err = h.d.Message(w, Msg{Op: OpDropped, Batch: idOf(b), Rows: []int{atoi(t, f[3])}}, h.now)
	case "empty", "failed":
		w, b := h.batch(f[1], f[2])
		op := map[string]Op{"empty": OpEmpty, "failed": OpFailed}[f[0]]
		err = h.d.Message(w, Msg{Op: op, Batch: idOf(b), Text: "boom"}, h.now)
	case "result":
		w, b := h.batch(f[1], f[2])
		if b == nil {
			err = h.d.Message(w, Msg{Op: OpResult, Batch: int64(atoi(t, strings.TrimPrefix(f[2], "b")))}, h.now)
			break
		}
		rows := make([]int, 0, len(b.items))
		for r, it := range b.items {
			if it != nil {
				rows = append(rows, r)
			}
		}
		if len(f) > 3 {
			rows = nil
			for _, r := range strings.Split(f[3], ",") {
				rows = append(rows, atoi(t, r))
			}
		}
		err = h.d.Message(w, Msg{Op: OpResult, Batch: b.id, Item: resultItem(b, rows)}, h.now)
	case "cancel":
		_, _, err = h.d.Cancel(jobID(f[1]), h.now)
	case "output", "outfail":
		var werr error
		if f[0] == "outfail" {
			werr = errors.New("disk full")
		}
		h.d.OutputWritten(h.job(f[1]), []int{1, 1, 2, 1, 1}, werr, h.now)
	case "saved":
		j := h.job(f[1])
		for j.writes > 0 {
			h.d.RecordSaved(j, j.recVer, nil)
		}
	case "wait":
		dur, perr := time.ParseDuration(f[1])
		if perr != nil {
			t.Fatal(perr)
		}
		h.now = h.now.Add(dur)
	case "stalls":
		h.d.CheckStalls(h.now)
	case "expire":
		keep, perr := time.ParseDuration(f[1])
		if perr != nil {
			t.Fatal(perr)
		}
		var dead []job.Record
		dead, err = h.d.Expire(h.now, keep)
		for _, r := range dead {
			h.trace = append(h.trace, "expired "+h.names(r.ID))
		}
	case "remove":
		var done bool
		_, done, err = h.d.Remove(jobID(f[1]))
		h.trace = append(h.trace, fmt.Sprintf("removed %v", done))
	case "status":
		st := h.d.Status(h.job(f[1]), h.now)
		h.trace = append(h.trace, fmt.Sprintf("%s %s %d/%d restarts=%d%s", f[1], st.State, st.Progress.Step, st.Progress.Steps,
			st.Restarts, map[bool]string{true: " err=" + st.Error, false: ""}[st.Error != ""]))
	case "load":
		h.seq++
		rec := job.Record{ID: jobID(f[1]), Seq: h.seq, State: job.State(f[2]), CreatedAt: h.now, Params: job.Params{Steps: 2, NumFrames: 1, Height: 8, Width: 8}}
		rec.CancelRequested = len(f) > 3 && f[3] == "cancel"
		h.d.Load([]job.Record{rec}, h.now)
	case "close":
		h.d.Close()
	default:
		t.Fatalf("script: unknown event %q", line)
	}
	h.record(err)
}

func idOf(b *batch) int64 {
	if b == nil {
		return -1
	}
	return b.id
}

// resultItem is what a worker sends back for rows of b: each latent plus (end-start).
func resultItem(b *batch, rows []int) *pipeline.Item {
	per := 0
	for _, it := range b.items {
		if it != nil {
			per = it.latent.Len()
		}
	}
	out := &pipeline.Item{Group: b.id, Step: b.end, Latent: tensor.New(len(rows), 1, 2, 1, 1)}
	for i, r := range rows {
		out.Samples = append(out.Samples, int64(r))
		if it := b.items[r]; it != nil {
			for k := range per {
				out.Latent.Data[i*per+k] = it.latent.Data[k] + float32(b.end-b.start)
			}
		}
	}
	return out
}

func runDispatch(t *testing.T, lim Limits, script []string) []string {
	t.Helper()
	if lim.MaxBatch == 0 {
		lim.MaxBatch = 4
	}
	if lim.MaxQueue == 0 {
		lim.MaxQueue = 8
	}
	if lim.MaxRunning == 0 {
		lim.MaxRunning = 8
	}
	if lim.Depth == 0 {
		lim.Depth = 2
	}
	if lim.MaxPrepares == 0 {
		lim.MaxPrepares = lim.MaxRunning // the cases on admission and batching prepare every admitted job at once
	}
	if lim.MaxAttempts == 0 {
		lim.MaxAttempts = 8
	}
	h := &dharness{t: t, d: New(lim), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ranks: map[int]*Worker{}}
	for _, line := range script {
		h.step(line)
	}
	return h.trace
}

func TestDispatcher(t *testing.T) {
	for _, tc := range dispatchCases {
		t.Run(tc.name, func(t *testing.T) {
			got := runDispatch(t, tc.lim, tc.script)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("trace:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tc.want, "\n\t"))
			}
		})
	}
}

// Every job logs one line when it starts and one when it ends, with its timings.
func TestDispatcherLogsJobStartAndEnd(t *testing.T) {
	h := &dharness{t: t, d: New(Limits{MaxBatch: 4, MaxQueue: 8, MaxRunning: 1, Depth: 2, MaxAttempts: 8}),
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ranks: map[int]*Worker{}}
	for _, line := range []string{"join 0", "submit a 2", "submit b 2", "submit c 2", "wait 1s", "prepared a", "wait 2s", "result 0 b1",
		"wait 500ms", "output a", "prepfail b", "cancel c", "prepared c"} {
		h.step(line)
	}
	want := []string{
		"job started id=a frames=1 size=8x8 steps=2 queued_ms=0",
		"job started id=b frames=1 size=8x8 steps=2 queued_ms=3000",
		"job succeeded id=a frames=1 size=8x8 steps=2 queued_ms=0 run_ms=3500 total_ms=3500",
		"job failed id=b frames=1 size=8x8 steps=2 queued_ms=3000 run_ms=500 total_ms=3500 err=bad image",
		"job started id=c frames=1 size=8x8 steps=2 queued_ms=3500",
		"job cancelled id=c frames=1 size=8x8 steps=2 queued_ms=3500 run_ms=0 total_ms=3500",
	}
	var got []string
	for _, l := range h.logs {
		if strings.HasPrefix(l, "job ") {
			got = append(got, l)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("job lines:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
