package wan

import (
	"context"
	"errors"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"sync"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// Component folders of Wan 2.1's image conditioner.
const (
	ImageEncoder   = "image_encoder"   // transformers CLIPVisionModel
	ImageProcessor = "image_processor" // transformers CLIPImageProcessor
)

// ImageHiddenState is the CLIP hidden state WanImageToVideoPipeline.encode_image takes:
// hidden_states[-2], the penultimate layer's output (no post_layernorm).
const ImageHiddenState = -2

// Conditioning keys of an image-conditioned Wan sample (besides the prompt embeddings).
const (
	// KeyImageEmbeds is the image encoder's hidden states of the image (and, for a
	// first-last-frame model, of the last image): [k, tokens, image_dim], k = 1 or 2.
	KeyImageEmbeds = "image_embeds"
	// KeyCondition is the condition the transformer input carries, in diffusers' layout:
	// for WanImageToVideoPipeline [T + z, F, h, w], the first-frame mask (T = the VAE's
	// temporal factor channels) then the normalised VAE latents of [image, zeros…(, last
	// image)]; with expand_timesteps [z, 1, h, w], the normalised latents of the image,
	// which replace latent frame 0.
	KeyCondition = "condition"
)

// Variant is which pipeline a Wan folder runs.
type Variant int

const (
	// TextToVideo is WanPipeline: the transformer takes the latents alone.
	TextToVideo Variant = iota
	// ImageToVideo is WanImageToVideoPipeline without expand_timesteps (Wan 2.1 I2V and
	// FLF2V, Wan 2.2 I2V-A14B): the transformer takes [latents | first-frame mask |
	// condition latents], in_channels 2·z_dim + the VAE's temporal factor, and, with
	// image_dim, the image encoder's hidden states.
	ImageToVideo
	// TextImageToVideo is a folder with expand_timesteps (Wan 2.2 TI2V-5B): without an
	// image, text-to-video with one timestep per token; with one, WanImageToVideoPipeline's
	// expand_timesteps path: the image's latents replace latent frame 0 at every step, its
	// tokens get timestep 0, and the final latents get it back.
	TextImageToVideo
)

// String names the variant as the docs do.
func (v Variant) String() string {
	return [...]string{"text-to-video", "image-to-video", "text-image-to-video"}[v]
}

// Variant returns which pipeline the folder runs: expand_timesteps makes it
// TextImageToVideo (whatever the class: the released TI2V-5B folder says WanPipeline),
// else its class.
func (f *Folder) Variant() Variant {
	switch {
	case f.ExpandTimesteps:
		return TextImageToVideo
	case f.Index.ClassName == I2VPipeline:
		return ImageToVideo
	}
	return TextToVideo
}

// ImageSpec is what a folder's image conditioning needs, read from its configs.
type ImageSpec struct {
	Variant Variant
	// ZDim and TemporalFactor are the VAE's; the mask has TemporalFactor channels.
	ZDim, TemporalFactor int
	// Encoder says the transformer has the image branch (image_dim): the folder's
	// image_encoder (CLIPVisionModel) and image_processor (CLIPImageProcessor) encode the
	// images, CLIP and Processor are their configs.
	Encoder   bool
	CLIP      clip.Config
	Processor clip.FeatureExtractorConfig
	// Image and LastImage say whether a generation takes an image and a last image.
	Image, LastImage family.Need
}

// ImageSpec reads and checks what the folder's image conditioning needs, from the
// transformer, VAE, image encoder and image processor configs. A folder that cannot run
// is one error naming the file: an image-to-video transformer whose in_channels is not
// 2·z_dim + T, an expand_timesteps transformer whose in_channels is not z_dim or whose
// patch is not (1, 2, 2) (diffusers' per-token timesteps stride the mask by 2), an image
// branch without image_encoder/ or image_processor/, an image_dim that is not the image
// encoder's hidden_size, a pos_embed_seq_len that is not two images' tokens, a processor
// whose output is not the encoder's image_size.
func (f *Folder) ImageSpec() (ImageSpec, error) {
	s := ImageSpec{Variant: f.Variant()}
	vc, err := f.VAEConfig()
	if err != nil {
		return s, err
	}
	s.ZDim, s.TemporalFactor = vc.ZDim, vc.TemporalFactor()
	for e := 1; e <= f.Experts(); e++ {
		tc, err := f.TransformerConfig(e)
		if err != nil {
			return s, err
		}
		if err := s.checkTransformer(tc); err != nil {
			return s, err
		}
		if e > 1 {
			continue
		}
		if tc.HasImage() {
			if s.Variant != ImageToVideo {
				return s, fmt.Errorf("%s: %w: image_dim %d is set, but the folder is %s (%s): no pipeline feeds it image embeddings", tc.Path, ErrFolder, tc.ImageDim, s.Variant, filepath.Join(f.Dir, checkpoint.IndexFile))
			}
			if err := f.readImageEncoder(&s, tc); err != nil {
				return s, err
			}
		}
	}
	switch s.Variant {
	case ImageToVideo:
		s.Image, s.LastImage = family.NeedRequired, family.NeedOptional
		if s.Encoder {
			// The CLIP embeddings of [image, last image] only fit a transformer that adds
			// pos_embed over two images' tokens (first-last-frame); with it, the last image is
			// needed (diffusers views the embeddings as two images per sample).
			s.LastImage = family.NeedNone
			if tc, _ := f.TransformerConfig(1); tc.PosEmbedSeqLen > 0 {
				s.LastImage = family.NeedRequired
			}
		}
	case TextImageToVideo:
		s.Image = family.NeedOptional
	}
	return s, nil
}

// checkTransformer checks an expert's channels against the variant.
func (s ImageSpec) checkTransformer(tc transformer.Config) error {
	switch s.Variant {
	case ImageToVideo:
		if want := 2*s.ZDim + s.TemporalFactor; tc.InChannels != want {
			return fmt.Errorf("%s: %w: in_channels %d: WanImageToVideoPipeline feeds the transformer latents (%d) | first-frame mask (%d) | condition latents (%d) = %d channels",
				tc.Path, ErrFolder, tc.InChannels, s.ZDim, s.TemporalFactor, s.ZDim, want)
		}
	case TextImageToVideo:
		if tc.InChannels != s.ZDim {
			return fmt.Errorf("%s: %w: in_channels %d: with expand_timesteps the transformer takes the latents alone (z_dim %d)", tc.Path, ErrFolder, tc.InChannels, s.ZDim)
		}
		if tc.PatchSize != [3]int{1, 2, 2} {
			return fmt.Errorf("%s: %w: patch_size %v: expand_timesteps gives one timestep per token by striding the first-frame mask by 2 ([:, ::2, ::2]), which needs patch_size [1, 2, 2]", tc.Path, ErrFolder, tc.PatchSize)
		}
	}
	if tc.OutChannels != s.ZDim && s.Variant != TextToVideo {
		return fmt.Errorf("%s: %w: out_channels %d, the VAE's z_dim is %d", tc.Path, ErrFolder, tc.OutChannels, s.ZDim)
	}
	return nil
}

// readImageEncoder reads and checks image_encoder/config.json and
// image_processor/preprocessor_config.json against the transformer's image branch.
func (f *Folder) readImageEncoder(s *ImageSpec, tc transformer.Config) error {
	for _, c := range []string{ImageEncoder, ImageProcessor} {
		if _, ok := f.Index.Components[c]; !ok {
			return fmt.Errorf("%s: %w: %s is missing (null or not listed); the transformer's image_dim %d needs the image encoder (%s)",
				filepath.Join(f.Dir, checkpoint.IndexFile), ErrFolder, c, tc.ImageDim, tc.Path)
		}
	}
	path := filepath.Join(f.ComponentDir(ImageEncoder), "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w: the image encoder's config: %w", path, ErrFolder, err)
	}
	if s.CLIP, err = clip.ParseConfig(path, data); err != nil {
		return fmt.Errorf("%w: %w", ErrFolder, err)
	}
	ppath := filepath.Join(f.ComponentDir(ImageProcessor), "preprocessor_config.json")
	if data, err = os.ReadFile(ppath); err != nil {
		return fmt.Errorf("%s: %w: the image processor's config: %w", ppath, ErrFolder, err)
	}
	if s.Processor, err = clip.ParseFeatureExtractorConfig(ppath, data); err != nil {
		return fmt.Errorf("%w: %w", ErrFolder, err)
	}
	if _, ok := pilFilter(s.Processor.Resample); !ok {
		return fmt.Errorf("%s: %w: resample %d is not a PIL filter vdpp runs (1 lanczos, 2 bilinear, 3 bicubic)", ppath, ErrFolder, s.Processor.Resample)
	}
	if tc.ImageDim != s.CLIP.HiddenSize {
		return fmt.Errorf("%s: %w: image_dim %d, the image encoder's hidden_size is %d (%s)", tc.Path, ErrFolder, tc.ImageDim, s.CLIP.HiddenSize, path)
	}
	if _, err := s.CLIP.HiddenLayers(ImageHiddenState); err != nil {
		return fmt.Errorf("%w: %w", ErrFolder, err)
	}
	if n := s.CLIP.NumPositions(); tc.PosEmbedSeqLen > 0 && tc.PosEmbedSeqLen != 2*n {
		return fmt.Errorf("%s: %w: pos_embed_seq_len %d: the first-last-frame model adds it over two images' %d tokens each (%s), 2 × %d = %d",
			tc.Path, ErrFolder, tc.PosEmbedSeqLen, n, path, n, 2*n)
	}
	h, w := processorOutput(s.Processor)
	if h != s.CLIP.ImageSize || w != s.CLIP.ImageSize {
		return fmt.Errorf("%s: %w: the processor makes %dx%d pixels, the image encoder takes %dx%d (image_size in %s)", ppath, ErrFolder, w, h, s.CLIP.ImageSize, s.CLIP.ImageSize, path)
	}
	s.Encoder = true
	return nil
}

// processorOutput is the size CLIPImageProcessor gives, when it does not depend on the
// image (a crop, or a resize to height × width); 0, 0 otherwise.
func processorOutput(p clip.FeatureExtractorConfig) (h, w int) {
	switch {
	case p.DoCenterCrop:
		return p.CropSize.Height, p.CropSize.Width
	case p.DoResize && p.Size.ShortestEdge == 0:
		return p.Size.Height, p.Size.Width
	}
	return 0, 0
}

func pilFilter(id int) (int, bool) {
	return id, id == video.PILLanczos || id == video.PILBilinear || id == video.PILBicubic
}

// clipProcessing turns the processor config into video.CLIPProcess's settings.
func clipProcessing(p clip.FeatureExtractorConfig) video.CLIPProcessing {
	return video.CLIPProcessing{DoResize: p.DoResize, ShortestEdge: p.Size.ShortestEdge, Height: p.Size.Height, Width: p.Size.Width,
		Resample: p.Resample, DoCenterCrop: p.DoCenterCrop, CropHeight: p.CropSize.Height, CropWidth: p.CropSize.Width,
		DoRescale: p.DoRescale, RescaleFactor: p.RescaleFactor, DoNormalize: p.DoNormalize, Mean: p.ImageMean, Std: p.ImageStd}
}

// checkImageFiles checks, without reading weights, that the image conditioner's weights
// files are there: the VAE's (its encoder makes the condition latents) and the image
// encoder's when the spec has one.
func (f *Folder) checkImageFiles(s ImageSpec, variant string) error {
	if err := f.checkVAEWeights(variant); err != nil {
		return err
	}
	if !s.Encoder {
		return nil
	}
	ck, err := checkpoint.Open(f.Dir)
	if err != nil {
		return err
	}
	if _, err := ck.WeightsPath(ImageEncoder, variant); err != nil {
		return fmt.Errorf("%w: the image encoder: %w", ErrFolder, err)
	}
	return nil
}

// checkVAEWeights checks that the VAE's weights file of variant is there.
func (f *Folder) checkVAEWeights(variant string) error {
	name, err := checkpoint.WeightsFileName(checkpoint.DiffusersStem, variant)
	if err != nil {
		return err
	}
	path := filepath.Join(f.ComponentDir(VAE), name)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s: %w: the VAE weights: %w", path, ErrFolder, err)
	}
	return nil
}

// ImageEncoding is the image conditioner of a Sampler: the image encoder (when the
// transformer has the image branch) and the VAE whose encoder makes the condition latents.
type ImageEncoding struct {
	Spec ImageSpec
	CLIP *clip.HiddenModel // nil without the image branch
	VAE  *vae.VAE

	mu   sync.Mutex
	last *condEntry // the last images' conditioning: every sample of a run shares it
}

type condEntry struct {
	img, lastImg image.Image
	h, w, frames int
	c            ImageConditioned
}

// loadImageEncoding loads the folder's image conditioner onto b; v, when not nil, is a VAE
// already loaded (the decoder's), shared.
func (f *Folder) loadImageEncoding(s ImageSpec, variant string, b backends.Backend, v *vae.VAE) (*ImageEncoding, error) {
	e := &ImageEncoding{Spec: s, VAE: v}
	var err error
	if e.VAE == nil {
		if e.VAE, err = vae.Load(f.ComponentDir(VAE), variant, b); err != nil {
			return nil, err
		}
	}
	if s.Encoder {
		ck, err := checkpoint.Open(f.Dir)
		if err != nil {
			return nil, err
		}
		if e.CLIP, err = clip.LoadHidden(ck, variant, b, ImageHiddenState); err != nil {
			if v == nil {
				e.VAE.Close()
			}
			return nil, fmt.Errorf("wan: image encoder %s: %w", f.ComponentDir(ImageEncoder), err)
		}
	}
	return e, nil
}

// ImageConditioned is what the image conditioner computes for one sample, with the values
// the parity check compares.
type ImageConditioned struct {
	// PixelValues [k, 3, S, S] and ImageEmbeds [k, tokens, hidden] are the image
	// processor's output and the image encoder's hidden_states[-2], k = 1 or 2 (with the
	// last image); nil without the image branch.
	PixelValues, ImageEmbeds *tensor.Dense
	// Resized and LastResized are the VAE's input images [1, 3, H, W] in [-1, 1] (the
	// LANCZOS resize to the job's size); LastResized is nil without a last image.
	Resized, LastResized *tensor.Dense
	// Condition is KeyCondition's tensor with a batch axis: [1, T + z, F, h, w], or
	// [1, z, 1, h, w] with expand_timesteps.
	Condition *tensor.Dense
	// FirstFrameMask is expand_timesteps' mask [1, 1, F, h, w] (0 on frame 0, else 1); nil
	// otherwise.
	FirstFrameMask *tensor.Dense
}

// Cond returns the conditioning entries of c.
func (c ImageConditioned) Cond() model.Conditioning {
	out := model.Conditioning{KeyCondition: &tensor.Dense{Shape: c.Condition.Shape[1:], Data: c.Condition.Data}}
	if c.ImageEmbeds != nil {
		out[KeyImageEmbeds] = c.ImageEmbeds
	}
	return out
}

// Encode computes a sample's image conditioning as WanImageToVideoPipeline does for a
// video of frames frames of width × height: the CLIP processor and the image encoder's
// hidden_states[-2] of [image(, last)] (with the image branch); each image resized to the
// job's size (PIL LANCZOS) in [-1, 1]; the VAE encoder's mode of [image, zeros…(, last)]
// (or of the image alone with expand_timesteps), normalised with latents_mean / std; and
// the first-frame mask. The video's zero frames are made chunk by chunk as the causal
// encoder takes them, so a long video does not hold its frames. The result of the last
// call is kept: every sample of a run (the same images and size) shares it.
func (e *ImageEncoding) Encode(ctx context.Context, img, last image.Image, frames, height, width int) (ImageConditioned, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.last; c != nil && c.img == img && c.lastImg == last && c.h == height && c.w == width && c.frames == frames {
		return c.c, nil
	}
	c, err := e.encode(ctx, img, last, frames, height, width)
	if err != nil {
		return c, err
	}
	e.last = &condEntry{img: img, lastImg: last, h: height, w: width, frames: frames, c: c}
	return c, nil
}

func (e *ImageEncoding) encode(ctx context.Context, img, last image.Image, frames, height, width int) (ImageConditioned, error) {
	var c ImageConditioned
	s := e.Spec
	if img == nil {
		return c, fmt.Errorf("%w: no image: the model is image-to-video", ErrInput)
	}
	switch {
	case last != nil && s.LastImage == family.NeedNone:
		return c, fmt.Errorf("%w: a last image, but the model takes none (%s)", ErrInput, lastImageWhy(s))
	case last == nil && s.LastImage == family.NeedRequired:
		return c, fmt.Errorf("%w: no last image: the model is first-last-frame (pos_embed_seq_len), it takes the first and the last image", ErrInput)
	}
	images := []image.Image{img}
	if last != nil {
		images = append(images, last)
	}
	if e.CLIP != nil {
		proc := clipProcessing(s.Processor)
		var px []*tensor.Dense
		for _, im := range images {
			p, err := video.CLIPProcess(im, proc)
			if err != nil {
				return c, fmt.Errorf("wan: image processor: %w", err)
			}
			px = append(px, p)
		}
		c.PixelValues = concatAxis(px, 0)
		var err error
		if c.ImageEmbeds, err = e.CLIP.Forward(c.PixelValues); err != nil {
			return c, fmt.Errorf("wan: image encoder: %w", err)
		}
	}
	var err error
	if c.Resized, err = video.VAEInput(img, width, height); err != nil {
		return c, err
	}
	if last != nil {
		if c.LastResized, err = video.VAEInput(last, width, height); err != nil {
			return c, err
		}
	}
	if err := ctx.Err(); err != nil {
		return c, err
	}
	vc := e.VAE.Config()
	lf := vc.LatentFrames(frames)
	if s.Variant == TextImageToVideo {
		frames = 1 // the image alone
	}
	lat, err := e.encodeVideo(ctx, c.Resized, c.LastResized, frames)
	if err != nil {
		return c, err
	}
	if lat, err = vc.Normalize(lat); err != nil {
		return c, err
	}
	h, w := lat.Shape[3], lat.Shape[4]
	if s.Variant == TextImageToVideo {
		c.Condition = lat
		c.FirstFrameMask = tensor.New(1, 1, lf, h, w)
		for i := h * w; i < len(c.FirstFrameMask.Data); i++ {
			c.FirstFrameMask.Data[i] = 1
		}
		return c, nil
	}
	tf := s.TemporalFactor
	mask := tensor.New(1, tf, lf, h, w)
	for ch := range tf {
		for k := range lf {
			// Video frame of mask channel ch of latent frame k: frame 0 for k = 0 (repeated
			// tf times), else 1 + tf·(k−1) + ch; the mask is 1 on the given frames.
			v := 0
			if k > 0 {
				v = 1 + tf*(k-1) + ch
			}
			if v == 0 || (last != nil && v == frames-1) {
				plane := mask.Data[(ch*lf+k)*h*w : (ch*lf+k+1)*h*w]
				for i := range plane {
					plane[i] = 1
				}
			}
		}
	}
	c.Condition = concatAxis([]*tensor.Dense{mask, lat}, 1)
	return c, nil
}

// lastImageWhy says why a spec takes no last image.
func lastImageWhy(s ImageSpec) string {
	if s.Variant == TextImageToVideo {
		return "expand_timesteps conditions on the first frame only"
	}
	return "its image encoder embeddings fit one image; a first-last-frame model sets pos_embed_seq_len"
}

// encodeVideo runs the VAE encoder over the video [first, zeros…(, last)] of frames frames
// (first and last [1, 3, H, W]) chunk by chunk and returns the posterior mode [1, z, f, h, w].
func (e *ImageEncoding) encodeVideo(ctx context.Context, first, last *tensor.Dense, frames int) (*tensor.Dense, error) {
	v := e.VAE
	cache := v.NewEncodeCache()
	defer cache.Close()
	z := v.Config().ZDim
	hw := first.Len() / 3
	var means []*tensor.Dense
	for _, r := range vae.EncodeChunks(frames) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := r[1] - r[0]
		chunk := tensor.New(1, 3, n, first.Shape[2], first.Shape[3])
		for f := r[0]; f < r[1]; f++ {
			var src *tensor.Dense
			switch {
			case f == 0:
				src = first
			case last != nil && f == frames-1:
				src = last
			default:
				continue
			}
			for ch := range 3 {
				copy(chunk.Data[(ch*n+f-r[0])*hw:(ch*n+f-r[0]+1)*hw], src.Data[ch*hw:(ch+1)*hw])
			}
		}
		m, err := v.EncodeChunk(cache, chunk)
		if err != nil {
			return nil, fmt.Errorf("wan: VAE encode of the condition: %w", err)
		}
		p, err := vae.NewPosterior(m, z)
		if err != nil {
			return nil, err
		}
		means = append(means, p.Mode())
	}
	return concatAxis(means, 2), nil
}

// Close releases the image encoder (the VAE belongs to the Sampler).
func (e *ImageEncoding) Close() error {
	if e.CLIP == nil {
		return nil
	}
	return e.CLIP.Close()
}

// errNoImageModel is returned when an image reaches a text-to-video folder.
var errNoImageModel = errors.New("the model is text-to-video and takes no image")

// concatAxis joins tensors of equal shapes but for axis along axis.
func concatAxis(parts []*tensor.Dense, axis int) *tensor.Dense {
	shape := append([]int(nil), parts[0].Shape...)
	shape[axis] = 0
	for _, p := range parts {
		shape[axis] += p.Shape[axis]
	}
	out := tensor.New(shape...)
	outer := tensor.NumElements(shape[:axis])
	off := 0
	for o := range outer {
		for _, p := range parts {
			n := tensor.NumElements(p.Shape[axis:])
			off += copy(out.Data[off:], p.Data[o*n:(o+1)*n])
		}
	}
	return out
}
