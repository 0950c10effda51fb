// Package families registers every model family vdpp ships with model/family: a blank
// import of this package makes `--model NAME|DIR` know them all. SVD and Wan, the built-in
// models (folders embedded in the binary, package builtin's table: "builtin",
// "builtin-wan", ...) as aliases, and the simulator denoisers "synthetic" and "dummy".
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
	for _, m := range builtin.Models {
		family.RegisterAlias(m.Name, m.Dir)
	}
	family.Register(family.Denoisers{Model: family.Simulator, CondKey: synthetic.CondKey, CacheReuse: synthetic.ReuseCost, StatedCost: true,
		New: func(c model.Config) (model.Denoiser, error) { return synthetic.New(c) }})
	family.Register(family.Denoisers{Model: "dummy", CondKey: dummy.CondKey,
		New: func(c model.Config) (model.Denoiser, error) { return dummy.New(dummy.FromModelConfig(c)) }})
}
