package serve

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// readIndex reads the job records out of an index file's bytes (bbolt's file format,
// version 2) without bbolt: every page, offset and length is checked against the file
// before it is read and a page is visited at most once, so a truncated or corrupt file is
// an error (wrapping errCorruptIndex), never a fault, a loop or a crash. It returns the
// values of the jobs bucket by key, in key order of the tree. bbolt itself only ever opens
// the fresh index start-up writes (see load). An empty file is an empty index.
//
// The format: two meta pages (page 0 and page 1), of which the valid one of the later
// transaction holds the page size, the high-water page id and the root bucket; branch pages
// hold (pos, ksize, child pgid) elements, leaf pages (flags, pos, ksize, vsize) elements
// whose key and value lie pos bytes after the element; a bucket's value is its root pgid
// and sequence, followed, for an inline bucket (root 0), by its one leaf page.
func readIndex(b []byte) ([][2][]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errCorruptIndex, fmt.Sprintf(format, args...))
	}
	le := binary.LittleEndian
	const pageHeader, elemSize, bucketHeader = 16, 16, 16
	const (
		branchPage = 0x01
		leafPage   = 0x02
		bucketLeaf = 0x01
	)
	type meta struct {
		pageSize   int
		root       uint64
		pgid, txid uint64
	}
	readMeta := func(off int) (meta, bool) {
		if off < 0 || off+pageHeader+64 > len(b) {
			return meta{}, false
		}
		m := b[off+pageHeader : off+pageHeader+64]
		h := fnv.New64a()
		h.Write(m[:56])
		ps := le.Uint32(m[8:])
		if le.Uint32(m[0:]) != 0xED0CDAED || le.Uint32(m[4:]) != 2 || ps < 512 || ps > 1<<20 || h.Sum64() != le.Uint64(m[56:]) {
			return meta{}, false
		}
		return meta{pageSize: int(ps), root: le.Uint64(m[16:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
	}
	m0, ok0 := readMeta(0)
	second := 4096
	if ok0 {
		second = m0.pageSize
	}
	m1, ok1 := readMeta(second)
	m := m0
	switch {
	case !ok0 && !ok1:
		return nil, bad("%d bytes with no valid meta page", len(b))
	case !ok0 || (ok1 && m1.txid > m0.txid):
		m = m1
	}
	if m.pgid < 2 || m.pgid > uint64(len(b)/m.pageSize) {
		return nil, bad("%d bytes, its pages need %d of %d bytes", len(b), m.pgid, m.pageSize)
	}

	seen := map[uint64]bool{}
	// page returns the bytes of page id (its overflow pages included).
	page := func(id uint64) ([]byte, error) {
		if id < 2 || id >= m.pgid || seen[id] {
			return nil, bad("page %d out of range or visited twice", id)
		}
		seen[id] = true
		off := int(id) * m.pageSize
		if off+pageHeader > len(b) {
			return nil, bad("page %d beyond the end", id)
		}
		overflow := uint64(le.Uint32(b[off+12:]))
		if le.Uint64(b[off:]) != id || id+overflow >= m.pgid {
			return nil, bad("page %d: header says page %d with %d overflow pages", id, le.Uint64(b[off:]), overflow)
		}
		end := off + int(1+overflow)*m.pageSize
		if end > len(b) {
			return nil, bad("page %d runs past the end", id)
		}
		return b[off:end], nil
	}
	// walk visits the leaf elements of the tree rooted at the page p (a whole page, or an
	// inline bucket's page), depth-first in key order.
	var walk func(p []byte, depth int, visit func(flags uint32, k, v []byte) error) error
	walk = func(p []byte, depth int, visit func(flags uint32, k, v []byte) error) error {
		if depth > 64 {
			return bad("a tree deeper than 64 pages")
		}
		if len(p) < pageHeader {
			return bad("a page of %d bytes", len(p))
		}
		flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
		if pageHeader+count*elemSize > len(p) {
			return bad("a page of %d elements in %d bytes", count, len(p))
		}
		for i := range count {
			e := pageHeader + i*elemSize
			switch flags {
			case branchPage:
				pos, ksize, child := int(le.Uint32(p[e:])), int(le.Uint32(p[e+4:])), le.Uint64(p[e+8:])
				if e+pos+ksize > len(p) {
					return bad("a branch key out of its page")
				}
				cp, err := page(child)
				if err != nil {
					return err
				}
				if err := walk(cp, depth+1, visit); err != nil {
					return err
				}
			case leafPage:
				fl, pos, ksize, vsize := le.Uint32(p[e:]), int(le.Uint32(p[e+4:])), int(le.Uint32(p[e+8:])), int(le.Uint32(p[e+12:]))
				start := e + pos
				if pos < 0 || ksize < 0 || vsize < 0 || start+ksize+vsize > len(p) || start+ksize+vsize < start {
					return bad("a leaf element out of its page")
				}
				if err := visit(fl, p[start:start+ksize], p[start+ksize:start+ksize+vsize]); err != nil {
					return err
				}
			default:
				return bad("a page of type %#x in a tree", flags)
			}
		}
		return nil
	}
	// bucket returns the root page of the bucket whose header (and inline page) is v.
	bucket := func(v []byte) ([]byte, error) {
		if len(v) < bucketHeader {
			return nil, bad("a bucket value of %d bytes", len(v))
		}
		if root := le.Uint64(v); root != 0 {
			return page(root)
		}
		return v[bucketHeader:], nil
	}
	rootPage, err := page(m.root)
	if err != nil {
		return nil, err
	}
	var out [][2][]byte
	found := false
	err = walk(rootPage, 0, func(flags uint32, k, v []byte) error {
		if flags&bucketLeaf == 0 || string(k) != string(jobsBucket) {
			return nil
		}
		if found {
			return bad("two %q buckets", jobsBucket)
		}
		found = true
		jp, err := bucket(v)
		if err != nil {
			return err
		}
		return walk(jp, 0, func(flags uint32, k, v []byte) error {
			if flags&bucketLeaf != 0 {
				return nil // a nested bucket: not one of ours
			}
			out = append(out, [2][]byte{k, v})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
