package parity

import (
	"context"
	"fmt"
	"sort"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/tensor"
)

// Runner computes a case's outputs (tensor name -> value) from its inputs. Outputs it
// leaves out are reported as "not computed" failures.
type Runner func(ctx context.Context, env *Env, c *Case) (map[string]*tensor.Dense, error)

// runners maps a case kind to its runner; each file implementing runners adds to it from
// an init function.
var runners = map[string]Runner{}

// register adds the runner of a case kind; a kind registered twice is a programming error.
func register(kind string, r Runner) {
	if _, dup := runners[kind]; dup {
		panic("wan parity: runner registered twice for " + kind)
	}
	runners[kind] = r
}

// Checker runs a case and compares its outputs itself (case kinds whose package has its
// own comparison: the VAE's and the schedulers'). It returns one Result per output.
type Checker func(ctx context.Context, env *Env, c *Case) ([]Result, error)

// checkers maps a case kind to its checker.
var checkers = map[string]Checker{}

// registerChecker adds the checker of a case kind.
func registerChecker(kind string, c Checker) {
	if _, dup := checkers[kind]; dup {
		panic("wan parity: checker registered twice for " + kind)
	}
	checkers[kind] = c
}

// Kinds returns the case kinds that have a runner or a checker, sorted.
func Kinds() []string {
	out := make([]string, 0, len(runners)+len(checkers))
	for k := range runners {
		out = append(out, k)
	}
	for k := range checkers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Env is what runners share during one Run: the folder, the backend and models loaded
// so far (each loaded once, closed by Run).
type Env struct {
	Folder  *wan.Folder
	Backend backends.Backend
	closers []func() error
	cache   map[string]any
}

// Cached returns the value stored under key, calling load (once) when there is none;
// close, when not nil, is called when Run ends.
func (e *Env) Cached(key string, load func() (any, func() error, error)) (any, error) {
	if v, ok := e.cache[key]; ok {
		return v, nil
	}
	v, closeFn, err := load()
	if err != nil {
		return nil, err
	}
	e.cache[key] = v
	if closeFn != nil {
		e.closers = append(e.closers, closeFn)
	}
	return v, nil
}

func (e *Env) close() {
	for _, c := range e.closers {
		_ = c()
	}
}

// Run checks every case under dir/cases of the Wan folder dir on backend. progress, when
// not nil, is told each case as it starts. Cases whose kind has no runner are reported
// StatusUnchecked (see the package contract).
func Run(ctx context.Context, dir string, backend backends.Backend, progress func(string)) (Report, error) {
	rep := Report{Dir: dir, Family: "wan", Backend: backend.Name()}
	folder, err := wan.Open(dir)
	if err != nil {
		return rep, err
	}
	cases, err := ListCases(dir)
	if err != nil {
		return rep, err
	}
	env := &Env{Folder: folder, Backend: backend, cache: map[string]any{}}
	defer env.close()
	for _, path := range cases {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		c, err := ReadCase(path, false)
		if err != nil {
			return rep, err
		}
		if chk, ok := checkers[c.Kind]; ok {
			if progress != nil {
				progress(c.Name)
			}
			res, err := chk(ctx, env, c)
			if err != nil {
				return rep, fmt.Errorf("wan parity: case %s: %w", c.Name, err)
			}
			rep.Results = append(rep.Results, checkedAll(c, res)...)
			continue
		}
		run, ok := runners[c.Kind]
		names := make([]string, 0, len(c.Outputs))
		for n := range c.Outputs {
			names = append(names, n)
		}
		sort.Strings(names)
		if !ok {
			for _, n := range names {
				rep.Results = append(rep.Results, Result{Case: c.Name, Tensor: n, Shape: c.Outputs[n].Shape,
					Limit: "-", Status: StatusUnchecked, Error: fmt.Sprintf("no Go runner for case kind %q yet", c.Kind)})
			}
			continue
		}
		if progress != nil {
			progress(c.Name)
		}
		if c, err = ReadCase(path, true); err != nil {
			return rep, err
		}
		got, err := run(ctx, env, c)
		for _, n := range names {
			if err != nil {
				rep.Results = append(rep.Results, Result{Case: c.Name, Tensor: n, Shape: c.Outputs[n].Shape,
					Limit: fmt.Sprintf("rel L2 <= %.0e", RelL2Limit), Status: StatusFail, Error: err.Error()})
				continue
			}
			rep.Results = append(rep.Results, compare(c.Name, n, got[n], c.Outputs[n]))
		}
	}
	rep.Pass = rep.Err() == nil
	return rep, nil
}

// checkedAll returns a checker's results plus a failure for every output of c it left out,
// so an output is never skipped.
func checkedAll(c *Case, res []Result) []Result {
	seen := map[string]bool{}
	for i := range res {
		res[i].Case = c.Name
		seen[res[i].Tensor] = true
	}
	names := make([]string, 0, len(c.Outputs))
	for n := range c.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !seen[n] {
			res = append(res, Result{Case: c.Name, Tensor: n, Shape: c.Outputs[n].Shape, Limit: "-", Status: StatusFail, Error: "not computed"})
		}
	}
	return res
}
