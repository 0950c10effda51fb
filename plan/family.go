package plan

import "github.com/vdpp/vdpp/model/family"

// FamilyWeights are the planner's weights for the resolved model r on a run of steps
// steps: the family's sizes by role (family.Weigher), with the experts' switch steps
// (family.Switcher). A family without a Weigher (the simulators) is costed by what loaded
// holds: its denoiser only.
func FamilyWeights(r family.Resolved, o family.Options, steps int, loaded family.Sampler) (Weights, error) {
	wg, ok := r.Family.(family.Weigher)
	if !ok {
		var w Weights
		if loaded != nil {
			for _, b := range loaded.WeightBytes() {
				w.Denoiser += b
			}
		}
		return w, nil
	}
	fw, err := wg.Weights(r.Dir, o)
	if err != nil {
		return Weights{}, err
	}
	w := Weights{Condition: fw.Condition, Decode: fw.Decode, Types: fw.Types}
	for _, b := range fw.Denoisers {
		w.Denoiser += b
	}
	if len(fw.Denoisers) > 1 {
		sw, err := r.Switches(steps)
		if err != nil {
			return Weights{}, err
		}
		if len(sw) > 0 { // else one expert runs every step: stages hold the sum
			w.Experts, w.ExpertSwitches = fw.Denoisers, sw
		}
	}
	return w, nil
}
