package comm

import "fmt"

// MeshFromFlags is the mesh of a command's --nproc, --pp, --cfg, --cp and --dp (0: not
// given), as bench and generate read them: none of the degrees given means a pure pipeline
// of nproc stages (defaultProcs when nproc is 0 too); otherwise an unset degree is 1,
// except pp, which takes what nproc leaves. nproc, when given, must equal the product;
// otherwise the error is ErrMesh, its message naming the flags.
func MeshFromFlags(nproc, pp, cfg, cp, dp, defaultProcs int) (Mesh, error) {
	if pp == 0 && cfg == 0 && cp == 0 && dp == 0 {
		if nproc == 0 {
			nproc = defaultProcs
		}
		if nproc < 1 {
			return Mesh{}, meshFlagError(fmt.Sprintf("--nproc %d: a run needs at least 1 process", nproc))
		}
		return Mesh{PP: nproc, CFG: 1, CP: 1, DP: 1}, nil
	}
	one := func(v *int) {
		if *v == 0 {
			*v = 1
		}
	}
	one(&cfg)
	one(&cp)
	one(&dp)
	if pp == 0 {
		pp = 1
		if rest := cfg * cp * dp; rest > 0 && nproc > 0 && nproc%rest == 0 {
			pp = nproc / rest
		}
	}
	m := Mesh{PP: pp, CFG: cfg, CP: cp, DP: dp}
	for _, a := range Axes {
		if m.Degree(a) < 1 {
			return Mesh{}, meshFlagError(fmt.Sprintf("--%s %d: every degree must be at least 1", a, m.Degree(a)))
		}
	}
	if world := m.Size(); nproc != 0 && nproc != world {
		return Mesh{}, meshFlagError(fmt.Sprintf("--nproc %d but --pp %d x --cfg %d x --cp %d x --dp %d = %d processes", nproc, pp, cfg, cp, dp, world))
	}
	return m, nil
}

// meshFlagError is an ErrMesh whose message is about the flags alone.
type meshFlagError string

func (e meshFlagError) Error() string        { return string(e) }
func (e meshFlagError) Is(target error) bool { return target == ErrMesh }
