package generate

import (
	"context"
	"sync"
)

// kv is the small key/value store ranks use to share per-sample timings and per-stage
// weights: the rendezvous store in a launched run, a map in a one-process run.
type kv interface {
	Set(ctx context.Context, key string, value []byte) error
	Wait(ctx context.Context, key string) ([]byte, error)
}

// localKV is kv for one process.
type localKV struct {
	mu   sync.Mutex
	m    map[string][]byte
	cond *sync.Cond
}

func newLocalKV() *localKV {
	k := &localKV{m: map[string][]byte{}}
	k.cond = sync.NewCond(&k.mu)
	return k
}

func (k *localKV) Set(_ context.Context, key string, value []byte) error {
	k.mu.Lock()
	k.m[key] = append([]byte(nil), value...)
	k.mu.Unlock()
	k.cond.Broadcast()
	return nil
}

// Wait returns the value of key; in one process every key is set before it is waited for,
// so a missing key is an error rather than a wait.
func (k *localKV) Wait(ctx context.Context, key string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	if !ok {
		return nil, errMissingKey(key)
	}
	return v, ctx.Err()
}

type errMissingKey string

func (e errMissingKey) Error() string { return "generate: no value for " + string(e) }
