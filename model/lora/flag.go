package lora

import "strings"

// Flag is a repeatable command-line flag of LoRAs (flag.Value): each use adds FILE[:STRENGTH]
// specs, several separated by commas; String gives them back comma-separated, so a parse of
// its String is the same list.
type Flag struct{ Specs *[]Spec }

// String implements flag.Value.
func (f Flag) String() string {
	if f.Specs == nil {
		return ""
	}
	parts := make([]string, len(*f.Specs))
	for i, s := range *f.Specs {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (f Flag) Set(v string) error {
	if v == "" {
		return nil
	}
	for _, part := range strings.Split(v, ",") {
		s, err := ParseSpec(part)
		if err != nil {
			return err
		}
		*f.Specs = append(*f.Specs, s)
	}
	return nil
}
