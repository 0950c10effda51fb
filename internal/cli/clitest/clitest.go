// Package clitest helps test options that travel as flags: Fill gives every field of an
// options struct a random value, so a round trip through a command line (parse, options,
// the worker's arguments, parse again) is checked for every field, including one added
// later without a flag; RoundTrip is that check.
package clitest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/cli"
)

// Fill sets every exported field of the struct p points to to a random value of its type:
// strings with spaces, '=' and quotes, signed integers, floats with fractions, booleans,
// durations to the nanosecond, unsigned 64-bit integers, the fields of a struct field the
// same way, and one or two such structs in a slice of structs. A field tagged `flag:"-"` is
// left as it is: it has no flag of its own (the command sets it), or its flag takes a few
// named values, which the test's explicit arguments cover. Fill panics on a field type it
// does not know, so a new kind of option is noticed by its test.
func Fill(p any, r *rand.Rand) {
	fill(reflect.ValueOf(p).Elem(), r)
}

// fill fills the struct v, and the structs among its fields.
func fill(v reflect.Value, r *rand.Rand) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if !t.Field(i).IsExported() || t.Field(i).Tag.Get("flag") == "-" {
			continue
		}
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeOf(time.Duration(0)):
			f.SetInt(r.Int64N(int64(time.Hour)) + 1)
		case f.Kind() == reflect.String:
			f.SetString(fmt.Sprintf("v %d=\"x\"", r.IntN(1000)))
		case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
			f.SetInt(r.Int64N(2000) - 1000)
		case f.Kind() == reflect.Uint64:
			f.SetUint(r.Uint64())
		case f.Kind() == reflect.Float64:
			f.SetFloat(r.NormFloat64() * 100)
		case f.Kind() == reflect.Bool:
			f.SetBool(r.IntN(2) == 1)
		case f.Kind() == reflect.Struct:
			fill(f, r)
		case f.Kind() == reflect.Map:
			// Sets beside the fields (which knobs were given) are the caller's to fill.
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Int:
			n := r.IntN(4) + 1
			s := reflect.MakeSlice(f.Type(), n, n)
			for i := range n {
				s.Index(i).SetInt(int64(i*3 + r.IntN(3)))
			}
			f.Set(s)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			n := 1 + r.IntN(2)
			s := reflect.MakeSlice(f.Type(), n, n)
			for j := range n {
				fill(s.Index(j), r)
			}
			f.Set(s)
		default:
			panic(fmt.Sprintf("clitest: field %s of type %s", t.Field(i).Name, f.Type()))
		}
	}
}

// RoundTrip checks that options survive the trip to a worker: args parsed into options
// (def's values, register's flags), rendered by workerArgs and parsed again give the same
// options; so do 50 options filled at random (Fill, over def's, then each of fills: the
// fields whose values a flag checks, drawn in range), which catches a field without a flag.
func RoundTrip[T any](t testing.TB, def func() T, register func(*T, *cli.FlagSet), workerArgs func(T) []string, args []string, fills ...func(*T, *rand.Rand)) {
	t.Helper()
	parse := func(args []string) T {
		t.Helper()
		o := def()
		fs := cli.New("worker", nil, nil)
		register(&o, fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("parsing %q: %v", args, err)
		}
		return o
	}
	o := parse(args)
	if back := parse(workerArgs(o)); !reflect.DeepEqual(back, o) {
		t.Fatalf("round trip of %q:\n got %+v\nwant %+v", args, back, o)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		o := def() // the fields Fill leaves keep def's values
		Fill(&o, r)
		for _, f := range fills {
			f(&o, r)
		}
		if back := parse(workerArgs(o)); !reflect.DeepEqual(back, o) {
			t.Fatalf("round trip:\n got %+v\nwant %+v\nargs %q", back, o, workerArgs(o))
		}
	}
}
