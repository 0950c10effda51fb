package comm

import (
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// The hello a dialer sends on a new data connection, and the acceptor's one-byte answer.
//
//	magic "VDPH" | version u16 | rank u32 | world u32 | secret [SecretLen]
const (
	helloMagic       = "VDPH"
	helloLen         = 4 + 2 + 4 + 4 + SecretLen
	helloAccepted    = 1
	handshakeTimeout = 10 * time.Second
)

func appendHello(dst []byte, rank, world int, secret []byte) []byte {
	dst = append(dst, helloMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, FrameVersion)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(rank))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(world))
	return append(dst, secret...)
}

// dialPeer connects to a peer's data listener and authenticates as rank. A peer that
// closes the connection instead of accepting gives an error wrapping ErrAuth.
func dialPeer(ctx context.Context, addr string, rank, world int, secret []byte) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	var ack [1]byte
	if _, err = c.Write(appendHello(nil, rank, world, secret)); err == nil {
		_, err = io.ReadFull(c, ack[:])
	}
	if err != nil {
		c.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			return nil, fmt.Errorf("%w: %s closed the connection during the handshake", ErrAuth, addr)
		}
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	if ack[0] != helloAccepted {
		c.Close()
		return nil, fmt.Errorf("%w: %s refused the handshake (%d)", ErrAuth, addr, ack[0])
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// acceptLoop accepts data connections until the listener closes; each is authenticated
// on its own goroutine.
func (t *TCPTransport) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.closing:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.opts.Logger.Error("comm: accept failed", "rank", t.rank, "err", err)
			return
		}
		t.mu.Lock()
		select {
		case <-t.closing:
			t.mu.Unlock()
			c.Close()
			return
		default:
		}
		t.pending[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.handshake(c)
	}
}

// handshake checks a dialer's hello and attaches the connection to its peer, or refuses
// it: closes it and logs why.
func (t *TCPTransport) handshake(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.pending, c)
		t.mu.Unlock()
	}()
	refuse := func(reason string, args ...any) {
		t.opts.Logger.Warn("comm: refused connection", "rank", t.rank, "remote", c.RemoteAddr().String(), "reason", fmt.Sprintf(reason, args...))
		c.Close()
	}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	var h [helloLen]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		refuse("reading hello: %v", err)
		return
	}
	rank := int(binary.LittleEndian.Uint32(h[6:]))
	world := int(binary.LittleEndian.Uint32(h[10:]))
	switch {
	case string(h[:4]) != helloMagic || binary.LittleEndian.Uint16(h[4:]) != FrameVersion:
		refuse("not a vdpp hello")
		return
	case subtle.ConstantTimeCompare(h[14:], t.secret) != 1:
		refuse("wrong secret")
		return
	case world != t.world:
		refuse("world size %d, want %d", world, t.world)
		return
	case rank < 0 || rank >= t.rank:
		refuse("rank %d may not dial rank %d", rank, t.rank)
		return
	}
	if t.peers[rank].connected() {
		refuse("rank %d is already connected", rank)
		return
	}
	if _, err := c.Write([]byte{helloAccepted}); err != nil {
		refuse("answering rank %d: %v", rank, err)
		return
	}
	c.SetDeadline(time.Time{})
	if !t.peers[rank].attach(c) {
		refuse("rank %d is already connected", rank)
	}
}
