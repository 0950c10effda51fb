// Package wire is the protocol between vdpp's inference server (package serve, the
// coordinator) and its worker ranks (package serve/worker): a fixed hello that
// authenticates a rank with the server's secret, then comm frames both ways.
//
// Contract:
//   - Every message carries a "ctl" tensor whose first element is the op; Message.Sample is
//     the batch id. A message without ctl is ErrProtocol.
//   - Conn.Send is safe for concurrent use and bounded by the write timeout; Conn.Recv fails
//     when nothing arrives within its timeout (the heartbeat rule: a silent peer is dead).
//   - The hello is helloLen bytes (magic, rank, pid, secret), answered with one byte 1;
//     a wrong magic or secret is refused in constant time.
//
// Messages:
//
//	run       coord -> worker  pipeline.Item message (latent, rows, cond, guidance) + ctl [op, end, steps]
//	                           and, for a job with a run spec (its sampler choice), "spec": the
//	                           spec text, one byte per element
//	cancel    coord -> worker  ctl [op], "rows": rows to drop at the next step boundary
//	ping      both ways        ctl [op]; a peer silent for the heartbeat timeout is dead
//	progress  worker -> coord  Step = step finished, ctl [op, compute µs]
//	dropped   worker -> coord  ctl [op], "rows": rows dropped after a cancel
//	result    worker -> coord  pipeline.Item message with the surviving rows, Step = end
//	empty     worker -> coord  every row was dropped
//	failed    worker -> coord  ctl [op], "msg": the error text, one byte per element
//	unit      coord -> worker  ctl [op, index, cfg, cp, port]: the rank is member index of a
//	                           unit of cfg x cp ranks (comm's rank order) whose comm
//	                           rendezvous store listens on port of the coordinator's host;
//	                           sent once, before any run
package wire

import (
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// ErrProtocol marks a malformed message between the coordinator and a worker.
var ErrProtocol = errors.New("serve: worker protocol error")

// The ops of the protocol (ctl[0]).
const (
	OpRun = iota + 1
	OpCancel
	OpPing
	OpProgress
	OpDropped
	OpResult
	OpEmpty
	OpFailed
	OpUnit
)

// Default heartbeat settings of coordinator and workers.
const (
	DefaultHeartbeat        = 500 * time.Millisecond
	DefaultHeartbeatTimeout = 3 * time.Second
)

const (
	helloMagic = "VDSW"
	// SecretLen is the length of the per-server secret every worker must present.
	SecretLen = 32
	helloLen  = 4 + 4 + 4 + SecretLen
	// SecretEnv carries the hex secret to worker processes (never on the command line).
	SecretEnv = "VDPP_SERVE_SECRET"
)

// Ctl is the control tensor [op, args...].
func Ctl(vals ...float32) comm.NamedTensor {
	return comm.NamedTensor{Name: "ctl", Tensor: &tensor.Dense{Shape: []int{len(vals)}, Data: vals}}
}

// Rows is the "rows" tensor of a cancel or dropped message.
func Rows(rows []int) comm.NamedTensor {
	t := tensor.New(len(rows))
	for i, r := range rows {
		t.Data[i] = float32(r)
	}
	return comm.NamedTensor{Name: "rows", Tensor: t}
}

// Text is the "msg" tensor of a failed message.
func Text(s string) comm.NamedTensor { return textTensor("msg", s) }

// textTensor holds s as one byte per element.
func textTensor(name, s string) comm.NamedTensor {
	t := tensor.New(len(s))
	for i := 0; i < len(s); i++ {
		t.Data[i] = float32(s[i])
	}
	return comm.NamedTensor{Name: name, Tensor: t}
}

// Op returns m's op and its whole ctl tensor.
func Op(m comm.Message) (op int, ctl []float32, err error) {
	c := m.Tensor("ctl")
	if c == nil || len(c.Data) == 0 {
		return 0, nil, fmt.Errorf("%w: message (batch %d) without ctl", ErrProtocol, m.Sample)
	}
	return int(c.Data[0]), c.Data, nil
}

// RowsOf returns m's "rows" tensor as ints (nil without one).
func RowsOf(m comm.Message) []int {
	t := m.Tensor("rows")
	if t == nil {
		return nil
	}
	out := make([]int, len(t.Data))
	for i, v := range t.Data {
		out[i] = int(v)
	}
	return out
}

// TextOf returns m's "msg" tensor as a string ("" without one).
func TextOf(m comm.Message) string { return textOf(m, "msg") }

// SpecOf returns a run message's spec text ("" without one).
func SpecOf(m comm.Message) string { return textOf(m, "spec") }

func textOf(m comm.Message, name string) string {
	t := m.Tensor(name)
	if t == nil {
		return ""
	}
	b := make([]byte, len(t.Data))
	for i, v := range t.Data {
		b[i] = byte(v)
	}
	return string(b)
}

// Ping is the heartbeat message.
func Ping() comm.Message { return comm.Message{Tensors: []comm.NamedTensor{Ctl(OpPing)}} }

// Run encodes a batch for a worker: run it from it.Step to end of a steps-step schedule,
// with the run spec spec ("" for the model's defaults: the folder's own scheduler).
func Run(it *pipeline.Item, end, steps int, spec string) comm.Message {
	m := it.ToMessage()
	m.Tensors = append(m.Tensors, Ctl(OpRun, float32(end), float32(steps)))
	if spec != "" {
		m.Tensors = append(m.Tensors, textTensor("spec", spec))
	}
	return m
}

// Unit tells a worker that it is member index of a unit of cfg x cp ranks whose
// rendezvous store listens on port of the coordinator's host.
func Unit(index, cfg, cp, port int) comm.Message {
	return comm.Message{Tensors: []comm.NamedTensor{Ctl(OpUnit, float32(index), float32(cfg), float32(cp), float32(port))}}
}

// Cancel asks a worker to drop row of batch id at its next step boundary.
func Cancel(id int64, row int) comm.Message {
	return comm.Message{Sample: id, Tensors: []comm.NamedTensor{Ctl(OpCancel), Rows([]int{row})}}
}

// Conn is one framed connection; Send is safe for concurrent use.
type Conn struct {
	c   net.Conn
	r   *comm.FrameReader
	wmu sync.Mutex
	buf []byte
	// writeTimeout bounds one send.
	writeTimeout time.Duration
}

// NewConn frames c; each Send must finish within writeTimeout (0: no limit).
func NewConn(c net.Conn, writeTimeout time.Duration) *Conn {
	return &Conn{c: c, r: comm.NewFrameReader(c, 0, 0), writeTimeout: writeTimeout}
}

// Send writes m.
func (w *Conn) Send(m comm.Message) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	var err error
	w.buf, err = comm.AppendMessage(w.buf[:0], m, 0)
	if err != nil {
		return err
	}
	if w.writeTimeout > 0 {
		w.c.SetWriteDeadline(time.Now().Add(w.writeTimeout))
	}
	_, err = w.c.Write(w.buf)
	if cap(w.buf) > 16<<20 {
		w.buf = nil
	}
	return err
}

// Recv reads the next message, failing if none arrives within timeout (0: no limit).
func (w *Conn) Recv(timeout time.Duration) (comm.Message, error) {
	if timeout > 0 {
		w.c.SetReadDeadline(time.Now().Add(timeout))
	}
	return w.r.ReadMessage()
}

// Close closes the connection.
func (w *Conn) Close() error { return w.c.Close() }

func appendHello(dst []byte, rank, pid int, secret []byte) []byte {
	dst = append(dst, helloMagic...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(rank))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(pid))
	return append(dst, secret...)
}

// Dial connects a worker to the coordinator at addr and authenticates.
func Dial(ctx context.Context, addr string, rank, pid int, secret []byte) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: worker %d: dial coordinator %s: %w", rank, addr, err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var ack [1]byte
	if _, err = c.Write(appendHello(nil, rank, pid, secret)); err == nil {
		_, err = io.ReadFull(c, ack[:])
	}
	if err != nil || ack[0] != 1 {
		c.Close()
		return nil, fmt.Errorf("serve: worker %d: coordinator %s refused the hello: %v", rank, addr, err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// ReadHello reads and checks a worker's hello, answering 1 on success.
func ReadHello(c net.Conn, secret []byte) (rank, pid int, err error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	var b [helloLen]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, 0, fmt.Errorf("%w: hello: %v", ErrProtocol, err)
	}
	if string(b[:4]) != helloMagic || subtle.ConstantTimeCompare(b[12:], secret) != 1 {
		return 0, 0, fmt.Errorf("%w: hello with a wrong magic or secret from %s", ErrProtocol, c.RemoteAddr())
	}
	rank = int(binary.LittleEndian.Uint32(b[4:]))
	pid = int(int32(binary.LittleEndian.Uint32(b[8:])))
	if _, err := c.Write([]byte{1}); err != nil {
		return 0, 0, err
	}
	return rank, pid, nil
}
