package wire

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/vdpp/vdpp/comm"
)

func TestHello(t *testing.T) {
	secret := make([]byte, SecretLen)
	secret[3] = 9
	for _, tc := range []struct {
		name string
		key  []byte
		ok   bool
	}{{"right secret", secret, true}, {"wrong secret", make([]byte, SecretLen), false}} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			type hello struct {
				rank, pid int
				err       error
			}
			got := make(chan hello, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- hello{err: err}
					return
				}
				defer c.Close()
				r, p, err := ReadHello(c, secret)
				got <- hello{r, p, err}
			}()
			c, derr := Dial(context.Background(), ln.Addr().String(), 3, 1234, tc.key)
			h := <-got
			if tc.ok {
				if derr != nil || h.err != nil || h.rank != 3 || h.pid != 1234 {
					t.Fatalf("hello: dial %v, read rank %d pid %d err %v", derr, h.rank, h.pid, h.err)
				}
				c.Close()
				return
			}
			if derr == nil || !errors.Is(h.err, ErrProtocol) {
				t.Fatalf("a wrong secret was accepted: dial %v, read %v", derr, h.err)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	m := Cancel(5, 2)
	if op, _, err := Op(m); op != OpCancel || err != nil || m.Sample != 5 {
		t.Fatalf("Cancel: op %d err %v batch %d", op, err, m.Sample)
	}
	if rows := RowsOf(m); len(rows) != 1 || rows[0] != 2 {
		t.Fatalf("RowsOf(Cancel(5, 2)) = %v", rows)
	}
	f := comm.Message{Tensors: []comm.NamedTensor{Ctl(OpFailed), Text("out of memory")}}
	if s := TextOf(f); s != "out of memory" {
		t.Fatalf("TextOf = %q", s)
	}
	if _, _, err := Op(comm.Message{}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a message without ctl: %v", err)
	}
}
