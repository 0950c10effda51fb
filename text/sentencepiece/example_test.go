package sentencepiece_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/vdpp/vdpp/text/sentencepiece"
)

// A T5-style model (pad 0, eos 1, unk 2): encode a prompt, then make the
// fixed-length rows and attention mask a text encoder takes.
func Example() {
	tok, err := sentencepiece.Load("testdata/models/nfkc_4000_t5ids.model")
	if err != nil {
		log.Fatal(err)
	}
	ids, _ := tok.Encode("Ｈello  wörld")
	fmt.Println(ids)
	pieces := make([]string, len(ids))
	for i, id := range ids {
		pieces[i] = fmt.Sprintf("%q", tok.IDToPiece(id))
	}
	fmt.Println(strings.Join(pieces, " "))
	fmt.Printf("%q\n", tok.Decode(ids))

	rows, mask, err := tok.EncodeBatch([]string{"Ｈello  wörld", ""}, 8, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rows, mask)
	// Output:
	// [3 3871 1993 3977 3977 3994 3 3951 2352 2 3977 3969]
	// "▁" "H" "e" "l" "l" "o" "▁" "w" "ö" "<unk>" "l" "d"
	// "Hello wö ⁇ ld"
	// [[3 3871 1993 3977 3977 3994 3 1] [1 0 0 0 0 0 0 0]] [[1 1 1 1 1 1 1 1] [1 0 0 0 0 0 0 0]]
}
