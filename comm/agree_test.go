package comm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/tensor"
)

func TestAgreeArgs(t *testing.T) {
	ts := dialWorld(t, 3, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	given := [][]string{{"--steps", "4"}, {"--steps", "4"}, {"--steps", "8"}}
	got := make([][]string, 3)
	errs := make([]error, 3)
	resolves := 0
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			got[r], errs[r] = AgreeArgs(ctx, ts[r].Store(), r, "job", given[r], func() ([]string, error) {
				resolves++
				return []string{"--steps=4", "--frames=14"}, nil
			})
		})
	}
	wg.Wait()
	if resolves != 1 {
		t.Fatalf("resolved %d times, want once (rank 0)", resolves)
	}
	for r := range 2 {
		if errs[r] != nil || strings.Join(got[r], " ") != "--steps=4 --frames=14" {
			t.Fatalf("rank %d: %v %v", r, got[r], errs[r])
		}
	}
	if !errors.Is(errs[2], ErrArgsDiffer) || !strings.Contains(errs[2].Error(), `argument 2 is "8" here, "4" on rank 0`) {
		t.Fatalf("rank 2 with another command line: %v", errs[2])
	}
}

func TestBytesTensorRoundTrip(t *testing.T) {
	b := []byte("{\"x\":1}\x00\xff")
	back, err := TensorBytes(BytesTensor(b))
	if err != nil || string(back) != string(b) {
		t.Fatalf("%q %v", back, err)
	}
	bad := &tensor.Dense{Shape: []int{1}, Data: []float32{256}}
	if _, err := TensorBytes(bad); err == nil {
		t.Fatal("256 read as a byte")
	}
}
