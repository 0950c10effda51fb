package checkpoint

import (
	"encoding/json"
	"fmt"
	"strings"
)

// fields reads typed values out of one JSON config object, applying defaults for absent or
// null keys. The first error is kept in err (naming the file and the key); later reads are
// then no-ops returning the default.
type fields struct {
	path string
	m    map[string]json.RawMessage
	err  error
}

// parseFields parses data as a JSON object.
func parseFields(path string, data []byte, sentinel error) (*fields, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, sentinel, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%s: %w: not a JSON object", path, sentinel)
	}
	return &fields{path: path, m: m}, nil
}

// raw returns the value of key, or nil when it is absent or null.
func (f *fields) raw(key string) json.RawMessage {
	v, ok := f.m[key]
	if !ok || strings.TrimSpace(string(v)) == "null" {
		return nil
	}
	return v
}

func (f *fields) fail(key string, format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%s: %w: key %q: %s", f.path, ErrConfig, key, fmt.Sprintf(format, args...))
	}
}

// decode unmarshals key into dst; it reports whether a value was present and decoded.
func (f *fields) decode(key string, dst any, what string) bool {
	v := f.raw(key)
	if v == nil || f.err != nil {
		return false
	}
	if err := json.Unmarshal(v, dst); err != nil {
		f.fail(key, "want %s, got %s", what, abbrev(v))
		return false
	}
	return true
}

func (f *fields) int(key string, def int) int {
	var v int
	if f.decode(key, &v, "an integer") {
		return v
	}
	return def
}

func (f *fields) float(key string, def float64) float64 {
	var v float64
	if f.decode(key, &v, "a number") {
		return v
	}
	return def
}

func (f *fields) bool(key string, def bool) bool {
	var v bool
	if f.decode(key, &v, "true or false") {
		return v
	}
	return def
}

func (f *fields) str(key string, def string) string {
	var v string
	if f.decode(key, &v, "a string") {
		return v
	}
	return def
}

func (f *fields) strs(key string, def []string) []string {
	var v []string
	if f.decode(key, &v, "a list of strings") {
		return v
	}
	return append([]string(nil), def...)
}

func (f *fields) ints(key string, def []int) []int {
	var v []int
	if f.decode(key, &v, "a list of integers") {
		return v
	}
	return append([]int(nil), def...)
}

func (f *fields) floats(key string, def []float64) []float64 {
	var v []float64
	if f.decode(key, &v, "a list of numbers") {
		return v
	}
	return append([]float64(nil), def...)
}

// intOrList reads an int (repeated n times) or a list of ints (which must have n items).
func (f *fields) intOrList(key string, def []int, n int) []int {
	v := f.raw(key)
	if v == nil || f.err != nil {
		if len(def) == 1 {
			return repeat(def[0], n)
		}
		return append([]int(nil), def...)
	}
	var one int
	if json.Unmarshal(v, &one) == nil {
		return repeat(one, n)
	}
	var list []int
	if err := json.Unmarshal(v, &list); err != nil {
		f.fail(key, "want an integer or a list of integers, got %s", abbrev(v))
		return nil
	}
	if len(list) != n {
		f.fail(key, "has %d items, want one per block (%d)", len(list), n)
	}
	return list
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func abbrev(b []byte) string {
	s := string(b)
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// checker accumulates the first validation failure of a config.
type checker struct {
	path string
	err  error
}

func (c *checker) check(ok bool, format string, args ...any) {
	if !ok && c.err == nil {
		c.err = fmt.Errorf("%s: %w: %s", c.path, ErrConfig, fmt.Sprintf(format, args...))
	}
}

func allPositive(v []int) bool {
	for _, x := range v {
		if x <= 0 {
			return false
		}
	}
	return true
}
