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

// Checker compares a case itself (for kinds whose limits are not relative L2, such as
// the schedulers' ulp limits) and returns one Result per output tensor.
type Checker func(ctx context.Context, env *Env, c *Case) ([]Result, error)

// runners and checkers map a case kind to what runs it; each file implementing one adds
// to them from an init function.
var (
	runners  = map[string]Runner{}
	checkers = map[string]Checker{}
)

// register adds the runner of a case kind; a kind registered twice is a programming error.
func register(kind string, r Runner) {
	if runners[kind] != nil || checkers[kind] != nil {
		panic("wan parity: runner registered twice for " + kind)
	}
	runners[kind] = r
}

// registerChecker adds the checker of a case kind.
func registerChecker(kind string, ch Checker) {
	if runners[kind] != nil || checkers[kind] != nil {
		panic("wan parity: runner registered twice for " + kind)
	}
	checkers[kind] = ch
}

// Kinds returns the case kinds that have a runner, sorted.
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
		run, check := runners[c.Kind], checkers[c.Kind]
		names := make([]string, 0, len(c.Outputs))
		for n := range c.Outputs {
			names = append(names, n)
		}
		sort.Strings(names)
		if check != nil {
			if progress != nil {
				progress(c.Name)
			}
			rs, err := check(ctx, env, c)
			rep.Results = append(rep.Results, reconcile(c, names, rs, err)...)
			continue
		}
		if run == nil {
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

// reconcile makes a checker's results cover exactly the case's output tensors: a tensor
// the checker did not report is a failure, and so is every tensor when it returned an
// error.
func reconcile(c *Case, names []string, rs []Result, err error) []Result {
	byName := map[string]Result{}
	for _, r := range rs {
		byName[r.Tensor] = r
	}
	out := make([]Result, 0, len(names))
	for _, n := range names {
		r, ok := byName[n]
		switch {
		case err != nil:
			r = Result{Case: c.Name, Tensor: n, Shape: c.Outputs[n].Shape, Status: StatusFail, Error: err.Error()}
		case !ok:
			r = Result{Case: c.Name, Tensor: n, Shape: c.Outputs[n].Shape, Status: StatusFail, Error: "not computed"}
		}
		r.Case = c.Name
		out = append(out, r)
	}
	return out
}
