package httpapi

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vdpp/vdpp/internal/wait"
)

func TestDefaultConnLimits(t *testing.T) {
	for _, c := range []struct {
		nofile         uint64
		max, perClient int
	}{
		{nofile: 1024, max: 768, perClient: 192},
		{nofile: 400, max: 144, perClient: 36},
		{nofile: 256, max: 8, perClient: 2}, // nothing left after the reserve: a few anyway
		{nofile: 20000, max: 4096, perClient: 1024},
		{nofile: 1 << 20, max: 4096, perClient: 1024},
	} {
		got := DefaultConnLimits(c.nofile)
		if got.Max != c.max || got.PerClient != c.perClient {
			t.Errorf("DefaultConnLimits(%d) = %+v, want max %d per client %d", c.nofile, got, c.max, c.perClient)
		}
		if reserve := int(c.nofile) - got.Max; c.nofile > 512 && reserve < minFDReserve {
			t.Errorf("nofile %d: only %d descriptors reserved", c.nofile, reserve)
		}
	}
	for _, c := range []struct {
		in, want ConnLimits
	}{
		{ConnLimits{}, ConnLimits{768, 192}},
		{ConnLimits{Max: 100}, ConnLimits{100, 25}},
		{ConnLimits{Max: 10, PerClient: 50}, ConnLimits{10, 10}},
		{ConnLimits{PerClient: 3}, ConnLimits{768, 3}},
		{ConnLimits{Max: 2}, ConnLimits{2, 1}},
	} {
		if got := c.in.WithDefaults(1024); got != c.want {
			t.Errorf("%+v.WithDefaults(1024) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestConnLimitsAdmit(t *testing.T) {
	l := ConnLimits{Max: 10, PerClient: 4}
	for _, c := range []struct {
		total, fromClient int
		want              bool
	}{
		{0, 0, true}, {9, 3, true}, {10, 0, false}, {5, 4, false}, {11, 5, false},
	} {
		if got := l.Admit(c.total, c.fromClient); got != c.want {
			t.Errorf("Admit(%d, %d) = %v, want %v", c.total, c.fromClient, got, c.want)
		}
	}
}

func TestEvictionVictim(t *testing.T) {
	for _, c := range []struct {
		per    map[string]int
		key    string
		victim string
		ok     bool
	}{
		{map[string]int{"a": 5}, "b", "a", true},
		{map[string]int{"a": 5, "b": 3}, "b", "a", true},
		{map[string]int{"a": 5, "b": 4}, "b", "a", false}, // only one more than b
		{map[string]int{"a": 3, "c": 3}, "b", "a", true},  // ties: the smallest key
		{map[string]int{"a": 1}, "b", "a", false},
		{map[string]int{"b": 9}, "b", "", false}, // never the newcomer's own client
		{map[string]int{}, "b", "", false},
	} {
		v, ok := EvictionVictim(c.per, c.key)
		if ok != c.ok || ok && v != c.victim {
			t.Errorf("EvictionVictim(%v, %q) = %q, %v; want %q, %v", c.per, c.key, v, ok, c.victim, c.ok)
		}
	}
}

// dialFrom connects to addr from the loopback address src (nil when the connection was
// refused before it was established).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLimitListener: connections over the per-client cap (from 127.0.0.2) and over the
// total get a 503 and are closed, another client still gets in, and a closed connection
// gives its slot back.
func TestLimitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := NewLimitListener(ln, ConnLimits{Max: 4, PerClient: 2}, prometheus.NewRegistry()).(*limitListener)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		ConnState: trackState}
	go srv.Serve(ll)
	defer srv.Close()
	addr := ln.Addr().String()
	// get sends one request; a refused connection reads as 503 (the refusal may also come
	// as a reset, before or after the 503 could be read).
	get := func(c net.Conn) int {
		t.Helper()
		if c == nil {
			return 503
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return 503
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return 503
			}
			t.Errorf("read: %v", err)
			return -1
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		if resp.StatusCode == 503 && !strings.Contains(string(b), "too_many_conns") {
			t.Errorf("refusal body %q", b)
		}
		if resp.StatusCode == 200 {
			return 200
		}
		return resp.StatusCode
	}
	a1, a2 := dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)
	if get(a1) != 200 || get(a2) != 200 {
		t.Fatal("first two connections of a client refused")
	}
	if st := get(dialFrom(t, "127.0.0.2", addr)); st != 503 {
		t.Errorf("third connection of one client: %d, want 503", st)
	}
	b1, b2 := dialFrom(t, "127.0.0.3", addr), dialFrom(t, "127.0.0.3", addr)
	if get(b1) != 200 || get(b2) != 200 {
		t.Fatal("another client refused below the total")
	}
	// All 4 taken, by two clients with 2 each: a newcomer takes an idle place of one of
	// them (127.0.0.2, the smallest), a second newcomer from the same address does not
	// (1 + 2 > 2), a third address does (127.0.0.3 still has 2).
	c1 := dialFrom(t, "127.0.0.4", addr)
	if st := get(c1); st != 200 {
		t.Errorf("newcomer with all places taken by idle connections: %d, want 200", st)
	}
	if st := get(dialFrom(t, "127.0.0.4", addr)); st != 503 {
		t.Errorf("second newcomer from the same address: %d, want 503", st)
	}
	if st := get(dialFrom(t, "127.0.0.5", addr)); st != 200 {
		t.Errorf("newcomer from a third address: %d, want 200", st)
	}
	if sa, sb := get(a1), get(a2); (sa == 503) == (sb == 503) {
		t.Errorf("127.0.0.2's connections answer %d and %d; want one evicted (503) and one 200", sa, sb)
	}
	c1.Close()
	wait.For(2*time.Second, func() bool { return ll.open() <= 3 }) // the get below says whether it did
	if st := get(dialFrom(t, "127.0.0.6", addr)); st != 200 {
		t.Errorf("after a close: %d, want 200", st)
	}
}
