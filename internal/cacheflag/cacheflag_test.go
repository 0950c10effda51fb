package cacheflag

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/pipeline"
)

// Args parses back to the same flags.
func TestArgsRoundTrip(t *testing.T) {
	want := Flags{Mode: "static", Threshold: 0.1136, Interval: 4, Branch: 2, Steps: "0-2,5", Drop: true}
	got := Default()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	got.Register(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestRule(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(report, []byte(`{"cache": {"mode": "fbcache", "computed_steps": "0-1,3-5,13"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	noCache := filepath.Join(t.TempDir(), "plain.json")
	if err := os.WriteFile(noCache, []byte(`{"steps": 4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := Default()
	for _, c := range []struct {
		f    Flags
		want pipeline.Cache
		err  string
	}{
		{f: d, want: pipeline.Cache{}},
		{f: Flags{Mode: "fbcache", Threshold: 0.2, Interval: 3, Drop: true}, want: pipeline.Cache{Mode: "fbcache", Threshold: 0.2, Drop: true}},
		{f: Flags{Mode: "deepcache", Threshold: 0.05, Interval: 4, Branch: 1}, want: pipeline.Cache{Mode: "deepcache", Interval: 4, Branch: 1}},
		{f: Flags{Mode: "static", Interval: 3}, want: pipeline.Cache{Mode: "static", Interval: 3}},
		{f: Flags{Mode: "static", Interval: 3, Steps: "0,4-5"}, want: pipeline.Cache{Mode: "static", Steps: []int{0, 4, 5}}},
		{f: Flags{Mode: "static", Steps: report}, want: pipeline.Cache{Mode: "static", Steps: []int{0, 1, 3, 4, 5, 13}}},
		{f: Flags{Mode: "static", Steps: noCache}, err: "holds no cache.computed_steps"},
		{f: Flags{Mode: "static", Steps: "/nonexistent/r.json"}, err: "--cache-steps"},
		{f: Flags{Mode: "fbcache", Threshold: -1}, err: "--cache-threshold -1 must be > 0"},
		{f: Flags{Mode: "deepcache", Interval: 1}, err: "--cache-interval 1"},
		{f: Flags{Mode: "magcache"}, err: `--cache "magcache"`},
	} {
		got, err := c.f.Rule()
		if c.err != "" {
			if err == nil || !errors.Is(err, pipeline.ErrCache) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want %q", c.f, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: %+v, %v; want %+v", c.f, got, err, c.want)
		}
	}
}
