package main

import (
	"flag"

	"github.com/vdpp/vdpp/data/procedural"
)

// ruleFlag registers --rule on fs, parsed into *r (which holds the default).
func ruleFlag(fs *flag.FlagSet, r *procedural.Rule) {
	fs.Func("rule", "dataset rule: colour (colour sets direction, shape speed) or heading (arrows move where they point) (default "+r.String()+")", func(s string) error {
		v, err := procedural.ParseRule(s)
		if err != nil {
			return err
		}
		*r = v
		return nil
	})
}
