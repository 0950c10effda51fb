// Package cli is vdpp's flag vocabulary: one table of flag names and the help group each
// belongs to, shared by every command, and a FlagSet around the standard library's that
// adds what the commands need on top of it: help grouped by topic (input, model, sampling,
// parallelism, output) with a usage line and examples, deprecated aliases that still work
// and say what replaced them, one short line for a mistyped flag (with the nearest name)
// instead of a dump of every flag, the set of flags given on the command line, and the
// arguments that re-create a parse (AsArgs: what a launcher hands its workers, generated
// from the flag set so no flag is typed twice).
//
// Contract: a FlagSet parses exactly as flag.FlagSet does (same syntax, same values); a
// name registered on any command means the same thing on every command (the vocabulary
// table groups it; a test holds every command's flags to the table). AsArgs of a parsed set,
// parsed again by a set built the same way, gives the same values.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ErrUsage marks command-line mistakes (vdpp exits with status 2 on them).
var ErrUsage = errors.New("usage")

// Group is a section of a command's help.
type Group int

// The help groups, in the order help lists them.
const (
	Input Group = iota
	Model
	Sampling
	Parallelism
	Output
	Other
)

var groupNames = [...]string{"input", "model", "sampling", "parallelism", "output", "other"}

func (g Group) String() string { return groupNames[g] }

// vocabulary is every flag name used by more than one command, or that a user is likely
// to look for by topic, and its group. A name not listed is in Other.
var vocabulary = map[string]Group{
	// input: what a generation starts from
	"image": Input, "prompt": Input, "negative-prompt": Input, "prompt-embeds": Input,
	"negative-prompt-embeds": Input, "golden": Input,
	// model: which model and how it loads
	"model": Model, "variant": Model, "backend": Model, "step-ms": Model, "cost": Model,
	"hidden-channels": Model, "latent-channels": Model, "model-dir": Model,
	"weights-dtype": Model, "transformer": Model, "transformer-2": Model, "unet": Model,
	// sampling: the knobs of one generation
	"steps": Sampling, "num-frames": Sampling, "height": Sampling, "width": Sampling,
	"seed": Sampling, "fps": Sampling, "guidance-scale": Sampling, "guidance-scale-2": Sampling,
	"min-guidance": Sampling, "max-guidance": Sampling, "motion-bucket-id": Sampling,
	"noise-aug-strength": Sampling, "window": Sampling, "overlap": Sampling, "blend": Sampling,
	"num-samples": Sampling, "decode-chunk-size": Sampling, "vae-tile": Sampling,
	"scheduler": Sampling, "flow-shift": Sampling, "lora": Model, "lora-2": Model,
	"latent-frames": Sampling, "latent-height": Sampling, "latent-width": Sampling,
	"cache": Sampling, "cache-threshold": Sampling, "cache-interval": Sampling, "cache-branch": Sampling,
	"cache-steps": Sampling, "cache-drop": Sampling,
	// parallelism: the mesh and how work is cut
	"nproc": Parallelism, "pp": Parallelism, "cfg": Parallelism, "cp": Parallelism, "dp": Parallelism,
	"plan": Parallelism, "goal": Parallelism, "devices": Parallelism, "micro-batch": Parallelism,
	"decode-ranks": Parallelism, "decode-steps": Parallelism, "condition-steps": Parallelism,
	"timeout": Parallelism, "heartbeat-timeout": Parallelism, "warmup-samples": Parallelism, "no-baseline": Parallelism,
	// output: where results go and what is shown
	"out": Output, "overwrite": Output, "json": Output, "trace": Output, "svg": Output,
	"progress": Output, "quiet": Output, "data-dir": Output,
	// other flags more than one command takes
	"api-token": Other, "split": Other, "rule": Other, "batch": Other, "data-seed": Other,
}

// Known reports whether name is in the vocabulary.
func Known(name string) bool {
	_, ok := vocabulary[name]
	return ok
}

// GroupOf is the help group of a flag name.
func GroupOf(name string) Group {
	if g, ok := vocabulary[name]; ok {
		return g
	}
	return Other
}

// FlagSet is a command's flags: a flag.FlagSet (embedded: register flags on it as usual)
// with the command's usage line and examples, deprecated aliases and hidden flags.
type FlagSet struct {
	*flag.FlagSet
	// Command is the command's name as typed after vdpp ("generate", "worker bench").
	Command string
	// Usage is the usage line after "vdpp " ("generate --model NAME|DIR ... [flags]");
	// Summary says in a sentence what the command does; Examples are full command lines.
	Usage    string
	Summary  string
	Examples []string
	// Groups moves flags to another help group than the vocabulary's for this command.
	Groups map[string]Group

	aliases map[string]string // deprecated name -> current name
	hidden  map[string]bool
	given   map[string]bool
	help    io.Writer
	warn    io.Writer
}

// New returns an empty FlagSet for command: -h prints its help to help, deprecation lines
// go to warn (nil: nowhere).
func New(command string, help, warn io.Writer) *FlagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if help == nil {
		help = io.Discard
	}
	if warn == nil {
		warn = io.Discard
	}
	return &FlagSet{FlagSet: fs, Command: command, aliases: map[string]string{}, hidden: map[string]bool{},
		given: map[string]bool{}, help: help, warn: warn}
}

// Alias registers old as a deprecated name of the flag current (registered before): it
// sets the same value and prints one line saying what to use instead. Help lists it on
// current's entry; AsArgs leaves it out.
func (f *FlagSet) Alias(old, current string) {
	cur := f.Lookup(current)
	if cur == nil {
		panic("cli: alias " + old + " of unregistered flag " + current)
	}
	f.aliases[old] = current
	f.Var(&aliasValue{f: f, old: old, cur: cur}, old, "deprecated: use --"+current)
}

// Deprecate marks the registered flag name as deprecated: it still works (and AsArgs renders
// it), setting it prints one line saying what to use instead (a flag or how, "--height
// (pixels)"), and help leaves it out.
func (f *FlagSet) Deprecate(name, instead string) {
	fl := f.Lookup(name)
	if fl == nil {
		panic("cli: deprecating unregistered flag " + name)
	}
	fl.Value = &deprecatedValue{Value: fl.Value, f: f, name: name, instead: instead}
	f.hidden[name] = true
}

// deprecatedValue is the flag.Value of a deprecated flag: it says so when set.
type deprecatedValue struct {
	flag.Value
	f             *FlagSet
	name, instead string
	reported      bool
}

func (d *deprecatedValue) Set(s string) error {
	if !d.reported {
		fmt.Fprintf(d.f.warn, "vdpp %s: --%s is deprecated: use %s\n", d.f.Command, d.name, d.instead)
		d.reported = true
	}
	return d.Value.Set(s)
}

// Hide keeps flags out of help (internal flags a launcher passes to its workers).
func (f *FlagSet) Hide(names ...string) {
	for _, n := range names {
		f.hidden[n] = true
	}
}

// aliasValue is the flag.Value of a deprecated name: it forwards to the current flag.
type aliasValue struct {
	f        *FlagSet
	old      string
	cur      *flag.Flag
	reported bool
}

func (a *aliasValue) String() string {
	if a == nil || a.cur == nil {
		return ""
	}
	return a.cur.Value.String()
}

func (a *aliasValue) Set(s string) error {
	if !a.reported {
		fmt.Fprintf(a.f.warn, "vdpp %s: --%s is deprecated: use --%s\n", a.f.Command, a.old, a.cur.Name)
		a.reported = true
	}
	a.f.given[a.cur.Name] = true
	return a.cur.Value.Set(s)
}

func (a *aliasValue) IsBoolFlag() bool {
	b, ok := a.cur.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Parse parses args. -h or --help prints the help and returns flag.ErrHelp; a mistake
// returns one line wrapping ErrUsage (the nearest flag name for an unknown one).
func (f *FlagSet) Parse(args []string) error {
	err := f.FlagSet.Parse(args)
	f.FlagSet.Visit(func(fl *flag.Flag) {
		if cur, ok := f.aliases[fl.Name]; ok {
			f.given[cur] = true
		} else {
			f.given[fl.Name] = true
		}
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		f.Help(f.help)
		return err
	}
	return fmt.Errorf("%w: %s (vdpp %s -h lists the flags)", ErrUsage, f.explain(err), f.Command)
}

// explain rewrites the flag package's error in vdpp's spelling (--name), with the nearest
// known flag for an unknown one.
func (f *FlagSet) explain(err error) string {
	msg := err.Error()
	const unknown = "flag provided but not defined: -"
	if name, ok := strings.CutPrefix(msg, unknown); ok {
		if near := f.nearest(name); near != "" {
			return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, near)
		}
		return fmt.Sprintf("unknown flag --%s", name)
	}
	// "invalid value "x" for flag -steps: parse error", "flag needs an argument: -steps"
	return strings.Replace(msg, " -", " --", 1)
}

// nearest is the registered flag closest to name (edit distance at most 2, or name a
// prefix of it), or "".
func (f *FlagSet) nearest(name string) string {
	best, bestD := "", 3
	f.VisitAll(func(fl *flag.Flag) {
		if f.hidden[fl.Name] {
			return
		}
		d := Distance(name, fl.Name)
		if strings.HasPrefix(fl.Name, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if d < bestD || (d == bestD && fl.Name < best) {
			best, bestD = fl.Name, d
		}
	})
	if cur, ok := f.aliases[best]; ok {
		return cur
	}
	return best
}

// Nearest returns the candidate closest to name (edit distance at most 2, or at most a
// third of name's length for longer names; a candidate that name is a prefix of, of 3
// letters or more, counts 1), or "" when none is that close. Ties go to the first
// candidate in order.
func Nearest(name string, candidates []string) string {
	best, bestD := "", max(3, len(name)/3+1)
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := Distance(name, c)
		if strings.HasPrefix(c, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b (the edit count behind every
// "did you mean").
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Given reports whether the flag name (or a deprecated alias of it) was on the command
// line of the last Parse.
func (f *FlagSet) Given(name string) bool { return f.given[name] }

// AsArgs renders every flag of the set except deprecated aliases and those in skip as
// --name=value, sorted by name: parsed by a set built the same way, it gives the same
// values. Flags whose value cannot be printed back (flag.Func) must be skipped.
func (f *FlagSet) AsArgs(skip ...string) []string {
	var out []string
	f.VisitAll(func(fl *flag.Flag) {
		if _, alias := f.aliases[fl.Name]; alias || slices.Contains(skip, fl.Name) {
			return
		}
		out = append(out, "--"+fl.Name+"="+fl.Value.String())
	})
	return out
}

// Help writes the usage line, the summary, the examples and the flags by group.
func (f *FlagSet) Help(w io.Writer) {
	usage := f.Usage
	if usage == "" {
		usage = f.Command + " [flags]"
	}
	fmt.Fprintf(w, "usage: vdpp %s\n", usage)
	if f.Summary != "" {
		fmt.Fprintf(w, "\n%s\n", f.Summary)
	}
	if len(f.Examples) > 0 {
		fmt.Fprintln(w, "\nexample:")
		for _, e := range f.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	byGroup := map[Group][]*flag.Flag{}
	f.VisitAll(func(fl *flag.Flag) {
		if _, alias := f.aliases[fl.Name]; alias || f.hidden[fl.Name] {
			return
		}
		g := GroupOf(fl.Name)
		if o, ok := f.Groups[fl.Name]; ok {
			g = o
		}
		byGroup[g] = append(byGroup[g], fl)
	})
	oldNames := map[string][]string{}
	for old, cur := range f.aliases {
		oldNames[cur] = append(oldNames[cur], "--"+old)
	}
	for g := Input; g <= Other; g++ {
		flags := byGroup[g]
		if len(flags) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, fl := range flags {
			writeFlag(w, fl, oldNames[fl.Name])
		}
	}
}

// writeFlag writes one flag's entry: "  --name TYPE" then its usage, default and old names.
func writeFlag(w io.Writer, fl *flag.Flag, old []string) {
	typ, usage := flag.UnquoteUsage(fl)
	line := "  --" + fl.Name
	if typ != "" {
		line += " " + typ
	}
	if def := fl.DefValue; !isZeroDefault(def) {
		usage += fmt.Sprintf(" (default %s)", quoteIfString(fl, def))
	}
	if len(old) > 0 {
		sort.Strings(old)
		usage += " (was " + strings.Join(old, ", ") + ")"
	}
	fmt.Fprintf(w, "%s\n      %s\n", line, usage)
}

// isZeroDefault reports whether def is a zero value (not worth printing).
func isZeroDefault(def string) bool {
	switch def {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

func quoteIfString(fl *flag.Flag, def string) string {
	typ, _ := flag.UnquoteUsage(fl)
	if typ == "string" {
		return fmt.Sprintf("%q", def)
	}
	return def
}

// optionError is an error about a command's options: its message is the one line the user
// reads (naming the flag and what is wrong), and it is its sentinel too.
type optionError struct {
	sentinel error
	err      error
}

func (e optionError) Error() string   { return e.err.Error() }
func (e optionError) Unwrap() []error { return []error{e.sentinel, e.err} }

// Errorf is fmt.Errorf(format, a...) (which may wrap errors with %w) that is also
// sentinel (a package's ErrOptions) without the sentinel's text in its message.
func Errorf(sentinel error, format string, a ...any) error {
	return optionError{sentinel: sentinel, err: fmt.Errorf(format, a...)}
}

// Bytes is the flag.Value of a byte count (ParseBytes): `fs.Var((*cli.Bytes)(&n), ...)`
// binds an int64.
type Bytes int64

// Set implements flag.Value.
func (b *Bytes) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = Bytes(n)
	return nil
}

// String implements flag.Value: the count in bytes, which Set reads back.
func (b *Bytes) String() string {
	if b == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*b), 10)
}

// ParseBytes reads a byte count: digits with an optional unit (B, KiB, MiB, GiB, TiB, or
// KB, MB, GB, TB in powers of 1000); a negative count is kept (it switches a limit off).
func ParseBytes(v string) (int64, error) {
	s := strings.TrimSpace(v)
	units := []struct {
		suffix string
		mul    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	mul := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mul = strings.TrimSpace(rest), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || (n > 0 && n > math.MaxInt64/mul) {
		return 0, fmt.Errorf("%q is not a byte count (e.g. 64GiB, 512MiB, 1000000)", v)
	}
	return n * mul, nil
}
