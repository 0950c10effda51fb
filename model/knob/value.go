package knob

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Given is the set of knobs a job (or a command line) set, by name; the others take the
// model's defaults.
type Given map[string]bool

// Names lists the given knobs in t's order.
func (g Given) Names(t Table) []string {
	var out []string
	for _, k := range t {
		if g[k.Name] {
			out = append(out, k.Name)
		}
	}
	return out
}

// fieldIndex maps a struct type's JSON names (promoted fields of embedded structs
// included) to their field index paths.
var fieldIndex sync.Map // reflect.Type -> map[string][]int

// fields returns the JSON name -> field index map of struct type t: its fields by JSON tag
// and those of the structs it embeds without a tag, the shallowest winning (as
// encoding/json names them; a Go name shadowed by another does not hide a JSON name).
func fields(t reflect.Type) map[string][]int {
	if m, ok := fieldIndex.Load(t); ok {
		return m.(map[string][]int)
	}
	m := map[string][]int{}
	var walk func(t reflect.Type, prefix []int, depth int, depthOf map[string]int)
	walk = func(t reflect.Type, prefix []int, depth int, depthOf map[string]int) {
		for i := range t.NumField() {
			f := t.Field(i)
			index := append(slices.Clone(prefix), i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, index, depth+1, depthOf)
				continue
			}
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			if d, ok := depthOf[name]; ok && d <= depth {
				continue
			}
			depthOf[name] = depth
			m[name] = index
		}
	}
	walk(t, nil, 0, map[string]int{})
	fieldIndex.Store(t, m)
	return m
}

// field returns the field of the struct *params named name, checked against the knob's
// kind.
func field(params any, k Knob) (reflect.Value, error) {
	v := reflect.ValueOf(params)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("knob: %T is not a struct", params)
	}
	idx, ok := fields(v.Type())[k.Name]
	if !ok {
		return reflect.Value{}, fmt.Errorf("knob: %s has no field with JSON name %q", v.Type(), k.Name)
	}
	f := v.FieldByIndex(idx)
	if !kindFits(k.Kind, f.Type()) {
		return reflect.Value{}, fmt.Errorf("knob: %s's field %q is %s, which cannot hold a %s", v.Type(), k.Name, f.Type(), k.Kind)
	}
	return f, nil
}

// kindFits reports whether a field of type t holds values of kind k.
func kindFits(k Kind, t reflect.Type) bool {
	switch k {
	case Int:
		return t.Kind() == reflect.Int || t.Kind() == reflect.Int64
	case Float:
		return t.Kind() == reflect.Float64
	case String:
		return t.Kind() == reflect.String
	case Bool:
		return t.Kind() == reflect.Bool
	case Steps:
		return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Int
	}
	return false
}

// CheckFields reports the first knob of t that the struct params has no field of the
// right type for (a test of every family's table holds them to family.Params).
func (t Table) CheckFields(params any) error {
	for _, k := range t {
		if _, err := field(params, k); err != nil {
			return err
		}
		switch {
		case k.Kind == "" || k.Help == "" || k.Group == "":
			return fmt.Errorf("knob: %q lacks a kind, help or group", k.Name)
		case !validName(k.Name):
			return fmt.Errorf("knob: %q is not a knob name (lower case, digits, underscores)", k.Name)
		case (k.Kind == Int || k.Kind == Float || k.Kind == Steps) && k.Max < k.Min:
			return fmt.Errorf("knob: %q's range [%v, %v] is empty", k.Name, k.Min, k.Max)
		}
	}
	return nil
}

// Get returns the value of knob name in *params (or params), as its field holds it.
func (t Table) Get(params any, name string) (any, error) {
	k, ok := t.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("knob: no knob %q", name)
	}
	f, err := field(params, k)
	if err != nil {
		return nil, err
	}
	return f.Interface(), nil
}

// Float returns an Int or Float knob's value in params as a float64 (0 for another kind).
func (t Table) Float(params any, name string) float64 {
	v, err := t.Get(params, name)
	if err != nil {
		return 0
	}
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// decimal is a number as JSON writes one (strconv.ParseFloat alone also takes "1_0", hex,
// "Inf" and "NaN").
var decimal = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// parseText reads a knob's value from text as a command line, a form or an OpenAI field
// writes it, exactly (no spaces, no rounding), and checks it against the knob's range.
func (k Knob) parseText(s string) (any, error) {
	switch k.Kind {
	case Int:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, Errorf(k.Name, "{%s} %q must be an integer %s", k.Name, s, k.Range())
		}
		return n, k.checkNumber(float64(n), s)
	case Float:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !decimal.MatchString(s) {
			return nil, Errorf(k.Name, "{%s} %q must be a number %s", k.Name, s, k.Range())
		}
		return f, k.checkNumber(f, s)
	case String:
		return s, k.checkString(s)
	case Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, Errorf(k.Name, "{%s} %q must be true or false", k.Name, s)
		}
		return b, nil
	case Steps:
		steps, err := ParseSteps(s)
		if err != nil {
			return nil, Errorf(k.Name, "{%s} %q: %v", k.Name, s, err)
		}
		return steps, k.checkSteps(steps)
	}
	return nil, fmt.Errorf("knob: %q has no kind", k.Name)
}

// parseJSON reads a knob's value from a JSON value, exactly: an Int from a JSON number
// without a fraction or exponent, a Float from a finite JSON number, a String from a
// string, a Bool from true or false, Steps from an array of integers.
func (k Knob) parseJSON(raw json.RawMessage) (any, error) {
	text := string(raw)
	switch k.Kind {
	case Int, Float:
		if !decimal.MatchString(text) {
			return nil, Errorf(k.Name, "{%s} %s must be a JSON number %s", k.Name, clip(text), k.Range())
		}
		return k.parseText(text)
	case String:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, Errorf(k.Name, "{%s} %s must be a string", k.Name, clip(text))
		}
		return s, k.checkString(s)
	case Bool:
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, Errorf(k.Name, "{%s} %s must be true or false", k.Name, clip(text))
		}
		return b, nil
	case Steps:
		var nums []json.Number
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&nums); err != nil {
			return nil, Errorf(k.Name, "{%s} %s must be an array of steps", k.Name, clip(text))
		}
		steps := make([]int, 0, len(nums))
		if max := k.maxLen(); len(nums) > max {
			return nil, Errorf(k.Name, "{%s} has %d entries, more than the %d steps it can name", k.Name, len(nums), max)
		}
		for _, n := range nums {
			v, err := strconv.ParseInt(n.String(), 10, 64)
			if err != nil {
				return nil, Errorf(k.Name, "{%s}: %s is not a step (a whole number)", k.Name, n)
			}
			if float64(v) < k.Min || float64(v) > k.Max {
				return nil, Errorf(k.Name, "{%s}: step %d is not %s", k.Name, v, k.Range())
			}
			steps = append(steps, int(v))
		}
		return steps, k.checkSteps(steps)
	}
	return nil, fmt.Errorf("knob: %q has no kind", k.Name)
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

// checkNumber checks an Int or Float value against the range.
func (k Knob) checkNumber(v float64, text string) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return Errorf(k.Name, "{%s} %s must be finite", k.Name, text)
	case !k.bounded():
		return nil
	case v < k.Min || (k.MinOpen && v == k.Min) || v > k.Max:
		return Errorf(k.Name, "{%s} %s must be %s", k.Name, text, k.Range())
	}
	return nil
}

// checkString checks a String value against the choices.
func (k Knob) checkString(s string) error {
	if len(k.Choices) > 0 && !slices.Contains(k.Choices, s) {
		return Errorf(k.Name, "{%s} %q must be %s", k.Name, s, k.Range())
	}
	return nil
}

// maxLen is the longest list a Steps knob takes.
func (k Knob) maxLen() int {
	if k.MaxLen > 0 {
		return k.MaxLen
	}
	return int(k.Max) + 1
}

// checkSteps checks a Steps list: ascending, each in the range, no longer than MaxLen.
func (k Knob) checkSteps(steps []int) error {
	if len(steps) > k.maxLen() {
		return Errorf(k.Name, "{%s} has %d entries, more than the %d steps it can name", k.Name, len(steps), k.maxLen())
	}
	for i, s := range steps {
		switch {
		case float64(s) < k.Min || float64(s) > k.Max:
			return Errorf(k.Name, "{%s}: step %d is not %s", k.Name, s, k.Range())
		case i > 0 && s <= steps[i-1]:
			return Errorf(k.Name, "{%s}: steps must ascend (%d after %d)", k.Name, s, steps[i-1])
		}
	}
	return nil
}

// set stores v (as parsed) in the field f.
func set(f reflect.Value, v any) {
	switch x := v.(type) {
	case int64:
		f.SetInt(x)
	case float64:
		f.SetFloat(x)
	case string:
		f.SetString(x)
	case bool:
		f.SetBool(x)
	case []int:
		f.Set(reflect.ValueOf(slices.Clone(x)))
	}
}

// SetText sets knob name in *params from text (a flag's, a form's or an OpenAI field's
// value), checked against its kind and range, and marks it given. An unknown name is an
// *Error.
func (t Table) SetText(params any, given Given, name, text string) error {
	k, ok := t.Lookup(name)
	if !ok {
		return t.Errorf("", "unknown parameter %q", name)
	}
	v, err := k.parseText(text)
	if err != nil {
		return err.(*Error).With(t)
	}
	f, err := field(params, k)
	if err != nil {
		return err
	}
	set(f, v)
	if given != nil {
		given[name] = true
	}
	return nil
}

// Text writes knob name's value in params as SetText reads it.
func (t Table) Text(params any, name string) (string, error) {
	v, err := t.Get(params, name)
	if err != nil {
		return "", err
	}
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case []int:
		return FormatSteps(x), nil
	}
	return "", fmt.Errorf("knob: %q holds %T", name, v)
}

// IsZero reports whether knob name's value in params is its type's zero.
func (t Table) IsZero(params any, name string) bool {
	k, ok := t.Lookup(name)
	if !ok {
		return true
	}
	f, err := field(params, k)
	return err != nil || f.IsZero()
}

// NonZero is the set of t's knobs whose values in *params are not their type's zero: the
// knobs of a resolved job, as given again (a stored job checked anew).
func (t Table) NonZero(params any) Given {
	out := Given{}
	for _, k := range t {
		if !t.IsZero(params, k.Name) {
			out[k.Name] = true
		}
	}
	return out
}

// Copy copies knob name's value from src to dst (both the same struct type).
func (t Table) Copy(dst, src any, name string) error {
	k, ok := t.Lookup(name)
	if !ok {
		return fmt.Errorf("knob: no knob %q", name)
	}
	d, err := field(dst, k)
	if err != nil {
		return err
	}
	s, err := field(src, k)
	if err != nil {
		return err
	}
	if s.Kind() == reflect.Slice {
		if s.IsNil() {
			d.Set(reflect.Zero(d.Type()))
			return nil
		}
		c := reflect.MakeSlice(s.Type(), s.Len(), s.Len())
		reflect.Copy(c, s)
		d.Set(c)
		return nil
	}
	d.Set(s)
	return nil
}

// Merge returns the knobs of given taken from set and every other knob of t from defaults
// into *dst (a struct of the same type, usually a copy of defaults).
func (t Table) Merge(dst, defaults, set any, given Given) error {
	for _, k := range t {
		src := defaults
		if given[k.Name] {
			src = set
		}
		if err := t.Copy(dst, src, k.Name); err != nil {
			return err
		}
	}
	return nil
}

// maxStepIndex bounds the steps a list names (and its length).
const maxStepIndex = 1 << 20

// ParseSteps reads a list of steps and ranges ("0-2,5,9") into ascending, distinct steps.
// Entries are separated by commas and may not be empty; a range a-b has a <= b.
func ParseSteps(s string) ([]int, error) {
	var out []int
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("no steps")
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		// Steps are below maxStepIndex, so the loop below ends and the list stays small.
		if err != nil || a < 0 || b < a || b >= maxStepIndex || len(out)+b-a > maxStepIndex {
			return nil, fmt.Errorf("%q is not a step or a range a-b of steps below %d", f, maxStepIndex)
		}
		for k := a; k <= b; k++ {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatSteps writes steps as ParseSteps reads them, runs as ranges ("0-2,5,9").
func FormatSteps(steps []int) string {
	var b strings.Builder
	for i := 0; i < len(steps); {
		j := i
		for j+1 < len(steps) && steps[j+1] == steps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(steps[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(steps[j]))
		}
		i = j + 1
	}
	return b.String()
}
