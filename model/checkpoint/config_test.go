package checkpoint

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseModelIndex(t *testing.T) {
	idx, err := ParseModelIndex("m.json", []byte(`{"_class_name": "P", "unet": ["diffusers", "U"], "safety_checker": [null, null], "requires_safety_checker": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if idx.ClassName != "P" || !reflect.DeepEqual(idx.Components, map[string]ComponentRef{"unet": {"diffusers", "U"}}) {
		t.Errorf("index %+v", idx)
	}
	for _, bad := range []string{`[`, `[]`, `{"_class_name": 3}`} {
		if _, err := ParseModelIndex("m.json", []byte(bad)); !errors.Is(err, ErrIndex) || !strings.Contains(err.Error(), "m.json") {
			t.Errorf("%s: err = %v, want ErrIndex naming m.json", bad, err)
		}
	}
}

func TestParseKeyList(t *testing.T) {
	order, shapes, err := ParseKeyList("k.txt", []byte("a.weight\t[2, 3]\n\nb\t[]\nc\t[4]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(order, []string{"a.weight", "b", "c"}) || !reflect.DeepEqual(shapes, map[string][]int{"a.weight": {2, 3}, "b": {}, "c": {4}}) {
		t.Errorf("got %v %v", order, shapes)
	}
	for _, bad := range []string{"a [2]", "a\t2", "a\t[x]", "a\t[-1]", "a\t[1]\na\t[1]", "\t[1]"} {
		if _, _, err := ParseKeyList("k.txt", []byte(bad)); !errors.Is(err, ErrKeyList) || !strings.Contains(err.Error(), "k.txt:") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}
