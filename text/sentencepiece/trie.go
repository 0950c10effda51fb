package sentencepiece

import (
	"slices"
	"strings"
)

// byteTrie maps byte strings to ids. Nodes are laid out breadth first with
// the children of a node contiguous and sorted by label, so a lookup is a
// short scan (or a binary search at wide nodes) per byte.
type byteTrie struct {
	firstChild  []int32 // index into labels/targets of the node's first edge
	numChildren []int32
	value       []int32 // id of the key ending at the node, or -1
	labels      []byte
	targets     []int32
	root        [256]int32 // the root's children by byte, -1 for none
}

// newByteTrie builds a trie of keys; ids[i] is the value of keys[i]. Empty
// keys are ignored. When a key repeats, the smallest id wins and dup names
// the key.
func newByteTrie(keys []string, ids []int32) (t *byteTrie, dup string) {
	type entry struct {
		key string
		id  int32
	}
	entries := make([]entry, 0, len(keys))
	for i, k := range keys {
		if k != "" {
			entries = append(entries, entry{k, ids[i]})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return int(a.id) - int(b.id)
	})
	sorted := make([]string, len(entries))
	vals := make([]int32, len(entries))
	for i, e := range entries {
		sorted[i], vals[i] = e.key, e.id
		if i > 0 && dup == "" && e.key == sorted[i-1] {
			dup = e.key
		}
	}
	t = &byteTrie{}
	type span struct {
		node, lo, hi, depth int
	}
	t.addNode()
	queue := []span{{0, 0, len(sorted), 0}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		lo := s.lo
		if lo < s.hi && len(sorted[lo]) == s.depth {
			t.value[s.node] = vals[lo]
			for lo < s.hi && len(sorted[lo]) == s.depth {
				lo++
			}
		}
		t.firstChild[s.node] = int32(len(t.labels))
		for i := lo; i < s.hi; {
			c := sorted[i][s.depth]
			j := i
			for j < s.hi && sorted[j][s.depth] == c {
				j++
			}
			child := t.addNode()
			t.labels = append(t.labels, c)
			t.targets = append(t.targets, int32(child))
			t.numChildren[s.node]++
			queue = append(queue, span{child, i, j, s.depth + 1})
			i = j
		}
	}
	for c := range t.root {
		t.root[c] = t.scanChild(0, byte(c))
	}
	return t, dup
}

func (t *byteTrie) addNode() int {
	t.firstChild = append(t.firstChild, 0)
	t.numChildren = append(t.numChildren, 0)
	t.value = append(t.value, -1)
	return len(t.value) - 1
}

// child returns the node reached from node by byte c, or -1.
func (t *byteTrie) child(node int32, c byte) int32 {
	if node == 0 {
		return t.root[c]
	}
	return t.scanChild(node, c)
}

func (t *byteTrie) scanChild(node int32, c byte) int32 {
	lo := t.firstChild[node]
	hi := lo + t.numChildren[node]
	if hi-lo <= 8 {
		for i := lo; i < hi; i++ {
			if t.labels[i] == c {
				return t.targets[i]
			}
		}
		return -1
	}
	for lo < hi {
		mid := int32(uint32(lo+hi) >> 1)
		switch l := t.labels[mid]; {
		case l == c:
			return t.targets[mid]
		case l < c:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return -1
}

// lookup returns the id of key, if it is in the trie.
func (t *byteTrie) lookup(key string) (int32, bool) {
	node := int32(0)
	for i := 0; i < len(key); i++ {
		if node = t.child(node, key[i]); node < 0 {
			return 0, false
		}
	}
	v := t.value[node]
	return v, v >= 0
}

// longestPrefix returns the length of the longest key that is a prefix of s
// (0 when none).
func (t *byteTrie) longestPrefix(s string) int {
	node, best := int32(0), 0
	for i := 0; i < len(s); i++ {
		if node = t.child(node, s[i]); node < 0 {
			break
		}
		if t.value[node] >= 0 {
			best = i + 1
		}
	}
	return best
}
