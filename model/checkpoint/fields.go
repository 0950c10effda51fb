package checkpoint

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Fields reads typed values out of one JSON config object, applying the constructor
// defaults for absent or null keys, as diffusers and transformers do. The first error is
// kept (naming the file and the key, wrapping ErrConfig) and returned by Err; later reads
// are then no-ops returning the default. The network packages parse their configs with it.
type Fields struct {
	path string
	m    map[string]json.RawMessage
	err  error
}

// ParseFields parses data as a JSON object; path names the file in errors, which wrap
// sentinel.
func ParseFields(path string, data []byte, sentinel error) (*Fields, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, sentinel, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%s: %w: not a JSON object", path, sentinel)
	}
	return &Fields{path: path, m: m}, nil
}

// Path returns the file the fields came from.
func (f *Fields) Path() string { return f.path }

// Err returns the first error of a read (nil when every read succeeded).
func (f *Fields) Err() error { return f.err }

// Raw returns the value of key, or nil when it is absent or null.
func (f *Fields) Raw(key string) json.RawMessage {
	v, ok := f.m[key]
	if !ok || strings.TrimSpace(string(v)) == "null" {
		return nil
	}
	return v
}

// Fail records an error about key (when none is recorded yet).
func (f *Fields) Fail(key string, format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%s: %w: key %q: %s", f.path, ErrConfig, key, fmt.Sprintf(format, args...))
	}
}

// Decode unmarshals key into dst; it reports whether a value was present and decoded
// (what names the expected type in the error).
func (f *Fields) Decode(key string, dst any, what string) bool {
	v := f.Raw(key)
	if v == nil || f.err != nil {
		return false
	}
	if err := json.Unmarshal(v, dst); err != nil {
		f.Fail(key, "want %s, got %s", what, Abbrev(v))
		return false
	}
	return true
}

// Int reads key as an integer, or def.
func (f *Fields) Int(key string, def int) int {
	var v int
	if f.Decode(key, &v, "an integer") {
		return v
	}
	return def
}

// Float reads key as a number, or def.
func (f *Fields) Float(key string, def float64) float64 {
	var v float64
	if f.Decode(key, &v, "a number") {
		return v
	}
	return def
}

// Bool reads key as true or false, or def.
func (f *Fields) Bool(key string, def bool) bool {
	var v bool
	if f.Decode(key, &v, "true or false") {
		return v
	}
	return def
}

// Str reads key as a string, or def.
func (f *Fields) Str(key string, def string) string {
	var v string
	if f.Decode(key, &v, "a string") {
		return v
	}
	return def
}

// Strs reads key as a list of strings, or def.
func (f *Fields) Strs(key string, def []string) []string {
	var v []string
	if f.Decode(key, &v, "a list of strings") {
		return v
	}
	return append([]string(nil), def...)
}

// Ints reads key as a list of integers, or def.
func (f *Fields) Ints(key string, def []int) []int {
	var v []int
	if f.Decode(key, &v, "a list of integers") {
		return v
	}
	return append([]int(nil), def...)
}

// Floats reads key as a list of numbers, or def.
func (f *Fields) Floats(key string, def []float64) []float64 {
	var v []float64
	if f.Decode(key, &v, "a list of numbers") {
		return v
	}
	return append([]float64(nil), def...)
}

// IntOrList reads an int (repeated n times) or a list of ints (which must have n items).
func (f *Fields) IntOrList(key string, def []int, n int) []int {
	v := f.Raw(key)
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
		f.Fail(key, "want an integer or a list of integers, got %s", Abbrev(v))
		return nil
	}
	if len(list) != n {
		f.Fail(key, "has %d items, want one per block (%d)", len(list), n)
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

// Abbrev shortens a JSON value for an error message.
func Abbrev(b []byte) string {
	s := string(b)
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// Checker accumulates the first validation failure of a config (naming Path, wrapping
// ErrConfig).
type Checker struct {
	Path string
	err  error
}

// Check records the failure format describes unless ok (only the first is kept).
func (c *Checker) Check(ok bool, format string, args ...any) {
	if !ok && c.err == nil {
		c.err = fmt.Errorf("%s: %w: %s", c.Path, ErrConfig, fmt.Sprintf(format, args...))
	}
}

// Err returns the first failure, or nil.
func (c *Checker) Err() error { return c.err }

// AllPositive reports whether every value is > 0.
func AllPositive(v []int) bool {
	for _, x := range v {
		if x <= 0 {
			return false
		}
	}
	return true
}
