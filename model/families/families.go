// Package families registers every model family vdpp ships with model/family: a blank
// import of this package makes `--model NAME|DIR` know them all. SVD (and the built-in
// model, an SVD folder embedded in the binary, as the alias "builtin") and the simulator
// denoisers "synthetic" and "dummy".
package families

import (
	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/dummy"
	"github.com/vdpp/vdpp/model/family"
	_ "github.com/vdpp/vdpp/model/svd" // registers the "svd" family
	"github.com/vdpp/vdpp/model/synthetic"
	_ "github.com/vdpp/vdpp/model/wan" // registers the "wan" family
)

func init() {
	family.RegisterAlias(builtin.Name, builtin.Dir)
	family.Register(family.Denoisers{Model: "synthetic", CondKey: synthetic.CondKey, CacheReuse: synthetic.ReuseCost,
		New: func(c model.Config) (model.Denoiser, error) { return synthetic.New(c) }})
	family.Register(family.Denoisers{Model: "dummy", CondKey: dummy.CondKey,
		New: func(c model.Config) (model.Denoiser, error) { return dummy.New(dummy.FromModelConfig(c)) }})
}
