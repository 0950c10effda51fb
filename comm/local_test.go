package comm

import (
	"context"
	"fmt"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

func localWorldFor(t *testing.T, n int, opts Options) []Transport {
	ts := NewLocal(n, opts)
	t.Cleanup(func() {
		for _, tr := range ts {
			tr.Close()
		}
	})
	return ts
}

func TestLocalSemantics(t *testing.T) { testTransportSemantics(t, localWorldFor, true) }

func TestLocalScalarStaysScalar(t *testing.T) {
	ts := localWorldFor(t, 2, Options{})
	ctx := context.Background()
	if err := ts[0].Send(ctx, 1, Message{Tensors: []NamedTensor{{"s", &tensor.Dense{Data: []float32{3}}}}}); err != nil {
		t.Fatal(err)
	}
	m, err := ts[1].Recv(ctx, 0)
	if err != nil || m.Tensors[0].Tensor.Shape != nil || m.Tensors[0].Tensor.Data[0] != 3 {
		t.Fatalf("%+v %v", m, err)
	}
}

// ExampleNewLocal hands a latent from rank 0 to rank 1 inside one process.
func ExampleNewLocal() {
	ts := NewLocal(2, Options{})
	defer ts[0].Close()
	defer ts[1].Close()
	ctx := context.Background()
	latent, _ := tensor.FromData([]float32{1, 2, 3, 4}, 1, 4)
	go ts[0].Send(ctx, 1, Message{Sample: 7, Step: 12, Tensors: []NamedTensor{{Name: "latent", Tensor: latent}}})
	m, err := ts[1].Recv(ctx, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Sample, m.Step, m.Tensor("latent"), m.Tensor("latent").Data)
	ts[0].Close()
	_, err = ts[1].Recv(ctx, 0)
	fmt.Println(err)
	// Output:
	// 7 12 Dense[1 4] [1 2 3 4]
	// rank 1: recv from rank 0: comm: peer gone: closed
}
