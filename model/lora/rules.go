package lora

import "strings"

// Rules is a Renamer written as a table: File and Network are dotted names whose "*"
// segments match any one segment, the matched segments filling the other side's stars in
// order; a trailing ".**" matches the remaining segments (at least one), carried over. The
// first matching rule wins; a name no rule matches keeps its name.
type Rules []Rule

// Rule renames one pattern (see Rules).
type Rule struct{ File, Network string }

// ToNetwork implements Renamer.
func (rs Rules) ToNetwork(file string) string {
	for _, r := range rs {
		if out, ok := rename(file, r.File, r.Network); ok {
			return out
		}
	}
	return file
}

// ToFile implements Renamer: the inverse of the first rule whose Network pattern matches.
func (rs Rules) ToFile(network string) string {
	for _, r := range rs {
		if out, ok := rename(network, r.Network, r.File); ok {
			return out
		}
	}
	return network
}

// rename matches name against pattern from and fills pattern to with what it matched.
func rename(name, from, to string) (string, bool) {
	segs, pf := strings.Split(name, "."), strings.Split(from, ".")
	var stars, rest []string
	for i, p := range pf {
		switch {
		case p == "**" && i == len(pf)-1:
			if len(segs) <= i {
				return "", false
			}
			rest = segs[i:]
		case i >= len(segs):
			return "", false
		case p == "*":
			stars = append(stars, segs[i])
		case p != segs[i]:
			return "", false
		}
	}
	if rest == nil && len(segs) != len(pf) {
		return "", false
	}
	var out []string
	for _, p := range strings.Split(to, ".") {
		switch p {
		case "*":
			if len(stars) == 0 {
				return "", false
			}
			out, stars = append(out, stars[0]), stars[1:]
		case "**":
			out = append(out, rest...)
		default:
			out = append(out, p)
		}
	}
	return strings.Join(out, "."), true
}
