package comm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/vdpp/vdpp/tensor"
)

// ErrArgsDiffer: a rank of a launched world was started with other arguments than rank 0.
var ErrArgsDiffer = errors.New("comm: ranks started with different arguments")

// agreed is what rank 0 publishes: the command line it was given and the options it
// resolved from it, as arguments.
type agreed struct {
	Given    []string `json:"given"`
	Resolved []string `json:"resolved"`
}

// AgreeArgs makes every rank of a launched world run with the options rank 0 resolved, so
// defaults read from files (a model's sizes, an image) are read once, on rank 0, and every
// rank runs the same job. Rank 0 calls resolve and publishes its result under key; every
// other rank checks that it was given the same command line as rank 0 (given) and returns
// rank 0's resolved arguments. A rank with another command line gets an error wrapping
// ErrArgsDiffer naming the first difference. A failure on rank 0 reaches the others through
// its Abort (see CloseWith).
func AgreeArgs(ctx context.Context, store *StoreClient, rank int, key string, given []string, resolve func() ([]string, error)) ([]string, error) {
	key = "agree/" + key
	if rank == 0 {
		resolved, err := resolve()
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(agreed{Given: given, Resolved: resolved})
		if err != nil {
			return nil, err
		}
		if err := store.Set(ctx, key, b); err != nil {
			return nil, err
		}
		return resolved, nil
	}
	b, err := store.Wait(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("rank %d: waiting for rank 0's options: %w", rank, err)
	}
	var a agreed
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("rank %d: rank 0's options: %w", rank, err)
	}
	if !slices.Equal(a.Given, given) {
		return nil, fmt.Errorf("%w: rank %d: %s", ErrArgsDiffer, rank, firstDifference(a.Given, given))
	}
	return a.Resolved, nil
}

// firstDifference says where two command lines part: "argument 3 is --steps=8 here, --steps=4
// on rank 0".
func firstDifference(rank0, here []string) string {
	for i := range max(len(rank0), len(here)) {
		a, b := "(nothing)", "(nothing)"
		if i < len(rank0) {
			a = fmt.Sprintf("%q", rank0[i])
		}
		if i < len(here) {
			b = fmt.Sprintf("%q", here[i])
		}
		if a != b {
			return fmt.Sprintf("argument %d is %s here, %s on rank 0 (every rank of a job takes the same command line)", i+1, b, a)
		}
	}
	return "same arguments"
}

// BytesTensor carries b in a tensor, one byte an element (integers 0..255, exact on the
// wire), for results that travel with tensors in one Message.
func BytesTensor(b []byte) *tensor.Dense {
	t := tensor.New(len(b))
	for i, c := range b {
		t.Data[i] = float32(c)
	}
	return t
}

// TensorBytes reads back what BytesTensor wrote.
func TensorBytes(t *tensor.Dense) ([]byte, error) {
	if t == nil {
		return nil, fmt.Errorf("comm: no bytes tensor")
	}
	b := make([]byte, len(t.Data))
	for i, v := range t.Data {
		if v < 0 || v > 255 || v != float32(math.Trunc(float64(v))) {
			return nil, fmt.Errorf("comm: bytes tensor holds %v at %d", v, i)
		}
		b[i] = byte(v)
	}
	return b, nil
}
