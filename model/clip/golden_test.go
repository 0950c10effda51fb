package clip

import "testing"

// parityTol is the relative L2 error the golden case must meet (fp32 reference).
const parityTol = 1e-4

func TestGoldenImageEmbeds(t *testing.T) {
	m, err := Load(openGolden(t), "", backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, want := goldenCase(t, "clip_image_embeds")
	emb, last, err := m.Forward(in["pixel_values"])
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "image_embeds", emb, want["image_embeds"], parityTol)
	checkClose(t, "last_hidden_state", last, want["last_hidden_state"], parityTol)
	if len(want) != 2 {
		t.Errorf("outputs.safetensors holds %d tensors, the test compares 2", len(want))
	}
}
