package parity

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/tensor"
)

func init() {
	for _, k := range []string{"transformer_forward", "transformer_2_forward", "transformer_forward_i2v"} {
		register(k, transformerForward)
	}
}

// transformerForward runs the transformer whose folder case.json's args.model_dir names
// (relative to the golden folder: "transformer", "transformer_2", or a case's own
// weights) on hidden_states, timestep, encoder_hidden_states and, when present,
// encoder_hidden_states_image; its output is "output".
func transformerForward(_ context.Context, env *Env, c *Case) (map[string]*tensor.Dense, error) {
	rel := c.StringArg("model_dir", "")
	if rel == "" {
		return nil, fmt.Errorf("case %s: case.json has no args.model_dir", c.Name)
	}
	if filepath.IsAbs(rel) || strings.HasPrefix(filepath.Clean(rel), "..") {
		return nil, fmt.Errorf("case %s: model_dir %q is outside the folder", c.Name, rel)
	}
	dir := filepath.Join(env.Folder.Dir, rel)
	variant := c.StringArg("weights_variant", "")
	v, err := env.Cached("transformer:"+dir+":"+variant, func() (any, func() error, error) {
		m, err := transformer.Load(dir, variant, env.Backend)
		if err != nil {
			return nil, nil, err
		}
		return m, m.Close, nil
	})
	if err != nil {
		return nil, err
	}
	m := v.(*transformer.Model)
	var in [3]*tensor.Dense
	for i, n := range []string{"hidden_states", "timestep", "encoder_hidden_states"} {
		if in[i], err = c.Input(n); err != nil {
			return nil, err
		}
	}
	out, err := m.Forward(in[0], in[1], in[2], c.Inputs["encoder_hidden_states_image"])
	if err != nil {
		return nil, err
	}
	return map[string]*tensor.Dense{"output": out}, nil
}
