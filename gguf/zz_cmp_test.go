package gguf

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

func TestZZCompare(t *testing.T) {
	a, b := os.Getenv("A"), os.Getenv("B")
	if a == "" {
		t.Skip()
	}
	fa, err := Open(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := Open(b)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("meta a:", len(fa.Metadata()), "b:", len(fb.Metadata()), "align", fa.Alignment(), fb.Alignment(), "data", fa.DataOffset(), fb.DataOffset())
	for _, kv := range fb.Metadata() {
		fmt.Println(" b kv", kv.Key, kv.Value)
	}
	diff := 0
	for _, ti := range fa.Tensors() {
		tb, ok := fb.Info(ti.Name)
		if !ok {
			fmt.Println("missing in b:", ti.Name)
			diff++
			continue
		}
		if ti.Type != tb.Type || fmt.Sprint(ti.Dims) != fmt.Sprint(tb.Dims) {
			fmt.Println("info differs:", ti.Name, ti.Type, ti.Dims, tb.Type, tb.Dims)
			diff++
			continue
		}
		x, _ := fa.Bytes(ti.Name)
		y, _ := fb.Bytes(ti.Name)
		if !bytes.Equal(x, y) {
			fmt.Println("data differs:", ti.Name, ti.Type)
			diff++
		}
	}
	fmt.Println(len(fa.Tensors()), len(fb.Tensors()), "tensors; differences:", diff, "first names b:", fb.Names()[:3])
}
