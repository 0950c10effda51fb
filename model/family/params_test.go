package family_test

import (
	"strings"
	"testing"

	_ "github.com/vdpp/vdpp/model/families"
	"github.com/vdpp/vdpp/model/family"
)

// Each family-specific field is read by the families that use it, and a knob set for a
// family that does not read it is refused naming the families it belongs to.
func TestReadsAndRefuseUnread(t *testing.T) {
	for param, want := range map[string]string{
		"guidance_scale": "wan", "max_guidance": "dummy svd synthetic", "motion_bucket_id": "svd", "num_frames": "dummy svd synthetic wan",
	} {
		if got := strings.Join(family.ReadersOf(param), " "); got != want {
			t.Errorf("ReadersOf(%q) = %q, want %q", param, got, want)
		}
	}
	synthetic, _ := family.Lookup("synthetic")
	knobs := []family.Knob{{Flag: "max-guidance", Param: "max_guidance", Set: true}, {Flag: "guidance-scale", Param: "guidance_scale", Set: false}}
	if err := family.RefuseUnread(synthetic, "synthetic", knobs); err != nil {
		t.Fatalf("synthetic refused what it reads or what was not set: %v", err)
	}
	knobs[1].Set = true
	err := family.RefuseUnread(synthetic, "synthetic", knobs)
	if want := "--guidance-scale applies to wan models; --model synthetic is in the synthetic family, which does not read it (its own: --max-guidance)"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	wan, _ := family.Lookup("wan")
	err = family.RefuseUnread(wan, "wan-dev", []family.Knob{{Flag: "motion-bucket-id", Param: "motion_bucket_id", Set: true}})
	if err == nil || !strings.Contains(err.Error(), "--motion-bucket-id applies to svd models; --model wan-dev is in the wan family") {
		t.Fatalf("got %v", err)
	}
}
