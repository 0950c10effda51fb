package sentencepiece

// doubleArray is a read-only Darts-clone double-array trie, the format of the
// trie inside a precompiled normalization charsmap. Each unit is a uint32:
//
//	bit 8        has_leaf: a key ends here; its value sits at node ^ offset
//	bits 0-7     label: the byte that leads to this unit (bit 31 set on leaves)
//	bits 10-31   offset, shifted left by 8 when bit 9 is set
//	bits 0-30    value, on leaf units
type doubleArray []uint32

func unitHasLeaf(u uint32) bool  { return (u>>8)&1 == 1 }
func unitValue(u uint32) int     { return int(u & (1<<31 - 1)) }
func unitLabel(u uint32) uint32  { return u & (1<<31 | 0xff) }
func unitOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
func (a doubleArray) at(i uint32) (uint32, bool) {
	if int(i) >= len(a) {
		return 0, false
	}
	return a[i], true
}

// prefixMatch is one key of the trie that is a prefix of the searched text.
type prefixMatch struct {
	value  int
	length int
}

// commonPrefixSearch appends to out (up to max entries, as Darts-clone fills
// its result array) the keys that are prefixes of key, shortest first. Reads
// outside the array end the search: a corrupt trie finds fewer matches, never
// panics.
func (a doubleArray) commonPrefixSearch(key string, out []prefixMatch, max int) []prefixMatch {
	out = out[:0]
	unit, ok := a.at(0)
	if !ok {
		return out
	}
	node := unitOffset(unit)
	for i := 0; i < len(key); i++ {
		c := uint32(key[i])
		node ^= c
		if unit, ok = a.at(node); !ok || unitLabel(unit) != c {
			return out
		}
		node ^= unitOffset(unit)
		if unitHasLeaf(unit) {
			leaf, ok := a.at(node)
			if !ok {
				return out
			}
			if len(out) < max {
				out = append(out, prefixMatch{value: unitValue(leaf), length: i + 1})
			}
		}
	}
	return out
}
