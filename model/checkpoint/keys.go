package checkpoint

import "strings"

// KeyMap renames the tensors of a file in another layout (a model's original release, a
// GGUF conversion) onto a network's names: the one declaration of that layout, read in both
// directions (ToNetwork to load, ToFile to name a missing tensor the way the file would).
// A name no rule matches keeps its name, so a file already in the network's names loads
// through the same map. The zero KeyMap and a nil *KeyMap rename nothing.
type KeyMap struct {
	// Layout names the layout for messages ("Wan's original layout").
	Layout string
	// Prefixes are stripped from the file's names that start with them (the first that
	// matches; e.g. "model.diffusion_model.", which stable-diffusion.cpp's convert and the
	// all-in-one checkpoints put before a denoiser's names).
	Prefixes []string
	// Rules rename the rest, the first matching rule winning.
	Rules []KeyRule
}

// KeyRule renames one pattern. File and Network are dotted names whose "*" segments match
// any one segment (a block number); the segments a File pattern's stars matched fill the
// Network pattern's stars in order. A pattern ending in ".**" matches any remaining
// segments (at least one), carried over unchanged: "blocks.*.self_attn.q.**" renames
// both the weight and the bias.
type KeyRule struct {
	File, Network string
}

// ToNetwork returns the network's name of a file's tensor.
func (m *KeyMap) ToNetwork(file string) string {
	if m == nil {
		return file
	}
	name := file
	for _, p := range m.Prefixes {
		if strings.HasPrefix(name, p) {
			name = name[len(p):]
			break
		}
	}
	for _, r := range m.Rules {
		if out, ok := rename(name, r.File, r.Network); ok {
			return out
		}
	}
	return name
}

// ToFile returns the name a file in this layout gives a network's tensor (without a
// prefix): the inverse of the first rule whose Network pattern matches.
func (m *KeyMap) ToFile(network string) string {
	if m == nil {
		return network
	}
	for _, r := range m.Rules {
		if out, ok := rename(network, r.Network, r.File); ok {
			return out
		}
	}
	return network
}

func (m *KeyMap) layout() string {
	if m == nil {
		return ""
	}
	return m.Layout
}

// rename matches name against pattern from and fills pattern to with what the stars matched.
func rename(name, from, to string) (string, bool) {
	segs := strings.Split(name, ".")
	pf := strings.Split(from, ".")
	var stars []string
	var rest []string
	for i, p := range pf {
		if p == "**" && i == len(pf)-1 {
			if len(segs) <= i {
				return "", false
			}
			rest = segs[i:]
			segs = segs[:i]
			break
		}
		if i >= len(segs) {
			return "", false
		}
		switch {
		case p == "*":
			stars = append(stars, segs[i])
		case p != segs[i]:
			return "", false
		}
		if i == len(pf)-1 && len(segs) != len(pf) {
			return "", false
		}
	}
	pt := strings.Split(to, ".")
	out := make([]string, 0, len(pt)+len(rest))
	for _, p := range pt {
		switch {
		case p == "*" && len(stars) > 0:
			out = append(out, stars[0])
			stars = stars[1:]
		case p == "**":
			out = append(out, rest...)
		default:
			out = append(out, p)
		}
	}
	return strings.Join(out, "."), true
}
