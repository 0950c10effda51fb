package comm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrStore: the rendezvous store refused a request or spoke out of protocol.
var ErrStore = errors.New("comm: store")

// maxStoreMessage bounds one store request or response.
const maxStoreMessage = 1 << 20

// Store operations.
const (
	opJoin = "join"
	opSet  = "set"
	opGet  = "get"
	opWait = "wait"
	opAdd  = "add"
)

// storeRequest is one request to the store: a 4-byte big-endian length, then JSON.
type storeRequest struct {
	Op        string `json:"op"`
	Rank      int    `json:"rank,omitempty"`
	World     int    `json:"world,omitempty"`
	Addr      string `json:"addr,omitempty"`
	Node      string `json:"node,omitempty"`
	Secret    []byte `json:"secret,omitempty"`
	Key       string `json:"key,omitempty"`
	Value     []byte `json:"value,omitempty"`
	Delta     int64  `json:"delta,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// storeResponse answers one request.
type storeResponse struct {
	Error  string   `json:"error,omitempty"`
	Addrs  []string `json:"addrs,omitempty"`
	Nodes  []string `json:"nodes,omitempty"`
	Secret []byte   `json:"secret,omitempty"`
	Value  []byte   `json:"value,omitempty"`
	Found  bool     `json:"found,omitempty"`
	Count  int64    `json:"count,omitempty"`
	// Timeout marks an Error caused by the request's wait running out.
	Timeout bool `json:"timeout,omitempty"`
}

// writeJSONFrame writes v as length-prefixed JSON.
func writeJSONFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxStoreMessage {
		return fmt.Errorf("%w: message of %d bytes exceeds %d", ErrStore, len(b), maxStoreMessage)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// readJSONFrame reads one length-prefixed JSON value into v, refusing oversized ones.
func readJSONFrame(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxStoreMessage {
		return fmt.Errorf("%w: message of %d bytes exceeds %d", ErrStore, n, maxStoreMessage)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v", ErrStore, err)
	}
	return nil
}
