package cli

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

// opts is a command's options for the tests.
type opts struct {
	Model   string
	Steps   int
	Scale   float64
	Quiet   bool
	Timeout time.Duration
	RunDir  string
}

func (o *opts) register(fs *FlagSet) {
	fs.StringVar(&o.Model, "model", o.Model, "model `NAME`")
	fs.IntVar(&o.Steps, "steps", o.Steps, "denoising steps")
	fs.Alias("total-steps", "steps")
	fs.Float64Var(&o.Scale, "guidance-scale", o.Scale, "CFG scale")
	fs.BoolVar(&o.Quiet, "quiet", o.Quiet, "print nothing")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "hand-off deadline")
	fs.StringVar(&o.RunDir, "run-dir", o.RunDir, "internal")
	fs.Hide("run-dir")
}

func parse(t *testing.T, args ...string) (opts, *FlagSet, string, error) {
	t.Helper()
	o := opts{Steps: 25, Timeout: time.Minute}
	var help, warn bytes.Buffer
	fs := New("bench", &help, &warn)
	fs.Usage, fs.Examples = "bench --model NAME [flags]", []string{"vdpp bench --model synthetic"}
	o.register(fs)
	err := fs.Parse(args)
	return o, fs, help.String() + warn.String(), err
}

func TestAliasSetsTheCurrentFlagAndSaysSo(t *testing.T) {
	o, fs, out, err := parse(t, "--total-steps", "8", "--total-steps=9")
	if err != nil {
		t.Fatal(err)
	}
	if o.Steps != 9 || !fs.Given("steps") || fs.Given("model") {
		t.Fatalf("steps %d, given steps %v model %v", o.Steps, fs.Given("steps"), fs.Given("model"))
	}
	if want := "vdpp bench: --total-steps is deprecated: use --steps\n"; out != want {
		t.Fatalf("output %q, want one line %q", out, want)
	}
}

func TestMistakesAreOneLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--stpes", "3"}, "unknown flag --stpes (did you mean --steps?) (vdpp bench -h lists the flags)"},
		{[]string{"--guidance"}, "unknown flag --guidance (did you mean --guidance-scale?)"},
		{[]string{"--total-step", "3"}, "did you mean --steps?"}, // nearest is an alias: its current name
		{[]string{"--zzzzzzzz"}, "unknown flag --zzzzzzzz (vdpp bench"},
		{[]string{"--steps", "many"}, `invalid value "many" for flag --steps`},
		{[]string{"--steps"}, "flag needs an argument: --steps"},
	}
	for _, tc := range tests {
		_, _, out, err := parse(t, tc.args...)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want ErrUsage containing %q", tc.args, err, tc.want)
		}
		if strings.Contains(err.Error(), "\n") || out != "" {
			t.Errorf("%q: error %q, output %q: want one line and no usage dump", tc.args, err, out)
		}
	}
}

func TestHelpIsGroupedWithUsageAndExample(t *testing.T) {
	_, _, out, err := parse(t, "-h")
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"usage: vdpp bench --model NAME [flags]\n", "example:\n  vdpp bench --model synthetic\n",
		"model:\n  --model NAME\n", "sampling:\n  --guidance-scale float\n", "  --steps int\n      denoising steps (default 25) (was --total-steps)\n",
		"output:\n  --quiet\n", "parallelism:\n  --timeout duration\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "run-dir") || strings.Contains(out, "  --total-steps") {
		t.Errorf("help lists a hidden flag or an alias on its own:\n%s", out)
	}
	// Groups follow the vocabulary's order: input, model, sampling, parallelism, output.
	if i, j := strings.Index(out, "model:"), strings.Index(out, "output:"); i < 0 || j < i {
		t.Errorf("groups out of order:\n%s", out)
	}
}

func TestArgsRoundTrip(t *testing.T) {
	o, fs, _, err := parse(t, "--model", "a b=c", "--total-steps", "7", "--guidance-scale", "0.1", "--quiet", "--timeout", "1m0.5s", "--run-dir", "/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	args := fs.AsArgs()
	for _, a := range args {
		if strings.HasPrefix(a, "--total-steps") {
			t.Fatalf("AsArgs renders the alias: %q", args)
		}
	}
	back, _, _, err := parse(t, args...)
	if err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	if !reflect.DeepEqual(back, o) {
		t.Fatalf("round trip: %+v, want %+v (args %q)", back, o, args)
	}
	if skipped := fs.AsArgs("run-dir"); len(skipped) != len(args)-1 {
		t.Fatalf("AsArgs(run-dir) = %q", skipped)
	}
}

func TestGroupOf(t *testing.T) {
	for name, want := range map[string]Group{"image": Input, "model": Model, "steps": Sampling, "pp": Parallelism, "out": Output, "listen": Other} {
		if got := GroupOf(name); got != want {
			t.Errorf("GroupOf(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestErrorf(t *testing.T) {
	sentinel := errors.New("x: bad options")
	inner := errors.New("no such file")
	err := Errorf(sentinel, "--image a.png: %w", inner)
	if err.Error() != "--image a.png: no such file" || !errors.Is(err, sentinel) || !errors.Is(err, inner) {
		t.Fatalf("%q: is sentinel %v, is inner %v", err, errors.Is(err, sentinel), errors.Is(err, inner))
	}
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"steps", "steps", 0}, {"stpes", "steps", 2}, {"step", "steps", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}} {
		if got := Distance(tc.a, tc.b); got != tc.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("--total-steps=3 --model x")
	f.Add("--stpes 3 -h")
	f.Fuzz(func(t *testing.T, line string) {
		var o opts
		fs := New("bench", nil, nil)
		o.register(fs)
		err := fs.Parse(strings.Fields(line))
		if err != nil && !errors.Is(err, ErrUsage) && !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%q: %v is neither a usage error nor help", line, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("%q: error of several lines: %q", line, err)
		}
	})
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1000": 1000, "64GiB": 64 << 30, "512 MiB": 512 << 20, "2GB": 2e9, "-1": -1, "7B": 7} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "1.5GiB", "99999999999TiB"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q): no error", in)
		}
	}
	// A Bytes flag prints what it reads back, in bytes.
	var n int64
	fs := New("x", nil, nil)
	fs.Var((*Bytes)(&n), "mem", "memory")
	if err := fs.Parse([]string{"--mem", "2KiB"}); err != nil || n != 2048 {
		t.Fatalf("--mem 2KiB: %d, %v", n, err)
	}
	if args := fs.AsArgs(); len(args) != 1 || args[0] != "--mem=2048" {
		t.Fatalf("AsArgs %q", args)
	}
}
