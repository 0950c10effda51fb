"""Reference folders and cases for Wan image-to-video, made by executing diffusers v0.35.2's
WanImageToVideoPipeline (and transformers' CLIPVisionModel / CLIPImageProcessor for Wan 2.1)
on Debian's CPU PyTorch 1.13 (/usr/bin/python3), with the shims of shims.py only.

It writes one tiny, randomly initialised diffusers folder per variant, each with a case:

  wan21-i2v        Wan 2.1 I2V: image_encoder/ (CLIPVisionModel) + image_processor/
                   (CLIPImageProcessor), one transformer with the image branch, in_channels
                   2·z_dim + 4 (latents | 4-channel first-frame mask | condition latents).
  wan21-flf2v      Wan 2.1 FLF2V: the same with pos_embed_seq_len, run with image and last_image.
  wan22-i2v-a14b   Wan 2.2 I2V-A14B: two experts (boundary_ratio, guidance_scale_2), no image
                   encoder; one case with the image, one with image and last_image.
  wan22-ti2v       Wan 2.2 TI2V-5B: expand_timesteps, the residual patch-2 VAE; model_index.json
                   says WanPipeline as the released checkpoint does, and the case runs
                   WanImageToVideoPipeline on its components, as a user running it with an
                   image does (the only v0.35.2 pipeline that takes an image with
                   expand_timesteps).

Each case folder (cases/<name>/) holds case.json (the call's arguments, shapes, versions),
inputs.safetensors (prompt_embeds, negative_prompt_embeds, the initial noise latents), the
input PNGs (image.png, last_image.png), and outputs.safetensors: the CLIP processor's
pixel_values and the image encoder's hidden_states[-2] (Wan 2.1), the VAE input images,
the condition (mask | normalised condition latents; or, with expand_timesteps, the
condition latents and the first-frame mask), every step's cond / uncond / guided noise
prediction and latents, the schedule and the expert of each step, the final latents, their
denormalisation and the decoded frames [B, F, H, W, 3] in [0, 1]. They are recorded by
wrapping the modules' calls of the real __call__; a second call without the wrappers gives
bit-identical frames (case.json says so).

    PYTHONPATH=$TRANSFORMERS_SRC DIFFUSERS_GIT_DIR=/path/to/diffusers.git \\
        /usr/bin/python3 scripts/wanref/i2v_cases.py model/wan/testdata/i2v [--alt]

TRANSFORMERS_SRC is a folder holding a `transformers` package with CLIPVisionModel,
CLIPVisionConfig and CLIPImageProcessor (and a transformers-*.dist-info, which diffusers'
availability check reads). A transformers release that imports on torch 1.13 works; the
committed data was made with a minimal package assembled from the transformers sources
(commits in REFERENCE below), their CLIP vision path verbatim. --alt writes folders of
other sizes (other head counts and dims, CLIP sizes, frame counts, non-square latents),
for checking `vdpp parity` on data that is not committed.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

from common import TAG, import_diffusers, write_safetensors

SHIMS = import_diffusers()
import PIL.Image  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanTransformer3DModel  # noqa: E402
from diffusers.pipelines.wan.pipeline_wan_i2v import WanImageToVideoPipeline  # noqa: E402

REFERENCE = {
    "diffusers": TAG,
    "transformers_files": {
        "models/clip/modeling_clip.py": "679021a6b0ded09d623a96e2bd2f822c5a548872",
        "models/clip/configuration_clip.py": "01841b341b64ab547cd2e30f09cb9c74929f50f2",
        "models/clip/image_processing_clip.py": "06053b84c14d72e9789fbf27844a75aa89b3ded7",
        "image_transforms.py": "000593ad84f26043f62917c541c57c4b71b9bc94",
        "image_processing_utils.py": "091630d58781404f2b35a7f5dff1c29bda71b549",
    },
}

UNIPC = dict(beta_end=0.02, beta_schedule="linear", beta_start=0.0001, disable_corrector=[],
             dynamic_thresholding_ratio=0.995, final_sigmas_type="zero", lower_order_final=True,
             num_train_timesteps=1000, predict_x0=True, prediction_type="flow_prediction",
             rescale_betas_zero_snr=False, sample_max_value=1.0, solver_order=2, solver_p=None,
             solver_type="bh2", steps_offset=0, thresholding=False, timestep_spacing="linspace",
             trained_betas=None, use_beta_sigmas=False, use_dynamic_shifting=False,
             use_exponential_sigmas=False, use_flow_sigmas=True, use_karras_sigmas=False)

VAE21 = dict(base_dim=4, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1, attn_scales=[],
             temperal_downsample=[False, True, True], dropout=0.0,
             latents_mean=[-0.626, 0.3602, -0.2894, 0.422], latents_std=[2.46, 2.5637, 2.0967, 2.7298])
VAE22 = dict(base_dim=4, decoder_base_dim=6, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1, attn_scales=[],
             temperal_downsample=[False, True, True], dropout=0.0, is_residual=True, in_channels=12,
             out_channels=12, patch_size=2, scale_factor_temporal=4, scale_factor_spatial=16,
             latents_mean=[0.1, -0.2, 0.05, 0.3], latents_std=[1.7, 2.2, 1.9, 2.4])

TR = dict(patch_size=[1, 2, 2], num_attention_heads=2, attention_head_dim=12, in_channels=12, out_channels=4,
          text_dim=32, freq_dim=16, ffn_dim=32, num_layers=2, cross_attn_norm=True,
          qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None, added_kv_proj_dim=None,
          rope_max_seq_len=1024, pos_embed_seq_len=None)
CLIP = dict(hidden_size=24, intermediate_size=48, projection_dim=16, num_hidden_layers=3, num_attention_heads=2,
            num_channels=3, image_size=28, patch_size=14, hidden_act="gelu", layer_norm_eps=1e-5)
PROC = dict(crop_size={"height": 28, "width": 28}, do_center_crop=True, do_convert_rgb=True, do_normalize=True,
            do_rescale=True, do_resize=True, image_mean=[0.48145466, 0.4578275, 0.40821073],
            image_std=[0.26862954, 0.26130258, 0.27577711], resample=3, rescale_factor=1 / 255,
            size={"shortest_edge": 28})


def variants(alt):
    """The folders: name -> spec. alt gives other sizes (not committed)."""
    clip_tokens = (CLIP["image_size"] // CLIP["patch_size"]) ** 2 + 1
    v = {
        "wan21-i2v": dict(
            index=dict(_class_name="WanImageToVideoPipeline", boundary_ratio=None, expand_timesteps=False),
            vae=VAE21, shift=3.0, clip=CLIP, proc=PROC,
            tr=dict(TR, image_dim=CLIP["hidden_size"], added_kv_proj_dim=24),
            cases={"i2v_pipeline": dict(size=(32, 48), frames=9, steps=4, guidance=5.0, text_len=512,
                                        image=(52, 36))}),
        "wan21-flf2v": dict(
            index=dict(_class_name="WanImageToVideoPipeline", boundary_ratio=None, expand_timesteps=False),
            vae=VAE21, shift=5.0, clip=CLIP, proc=PROC,
            tr=dict(TR, image_dim=CLIP["hidden_size"], added_kv_proj_dim=24, pos_embed_seq_len=2 * clip_tokens),
            cases={"flf2v_pipeline": dict(size=(32, 32), frames=9, steps=3, guidance=4.0, text_len=512,
                                          image=(30, 45), last_image=(45, 30))}),
        "wan22-i2v-a14b": dict(
            index=dict(_class_name="WanImageToVideoPipeline", boundary_ratio=0.9, expand_timesteps=False),
            vae=VAE21, shift=5.0, tr=dict(TR), experts=2,
            cases={"i2v_pipeline": dict(size=(32, 48), frames=9, steps=4, guidance=4.0, guidance2=3.0,
                                        text_len=8, image=(50, 30)),
                   "i2v_pipeline_last_image": dict(size=(32, 32), frames=5, steps=3, guidance=3.5, guidance2=2.0,
                                                   text_len=6, image=(33, 33), last_image=(20, 28))}),
        "wan22-ti2v": dict(
            index=dict(_class_name="WanPipeline", boundary_ratio=None, expand_timesteps=True),
            vae=VAE22, shift=5.0, tr=dict(TR, in_channels=4, out_channels=4),
            cases={"ti2v_pipeline": dict(size=(32, 64), frames=5, steps=4, guidance=5.0, text_len=7,
                                         image=(70, 40))}),
    }
    if not alt:
        return v
    # Other sizes: 3 heads x 10 (rotary 2/4/4), 3 layers, text_dim 20, CLIP 3 heads x 8 over
    # 4 layers at 42 pixels (10 tokens), z_dim 6, non-square latents, other frame counts.
    clip = dict(CLIP, hidden_size=24, num_attention_heads=3, num_hidden_layers=4, image_size=42, intermediate_size=40)
    proc = dict(PROC, crop_size={"height": 42, "width": 42}, size={"shortest_edge": 42})
    vae = dict(VAE21, z_dim=6, latents_mean=[0.1, -0.1, 0.2, -0.2, 0.0, 0.3], latents_std=[1.5, 2.0, 2.5, 1.2, 1.8, 2.2])
    vae22 = dict(VAE22, z_dim=6, latents_mean=[0.0] * 6, latents_std=[1.0, 1.5, 2.0, 2.5, 3.0, 3.5])
    tr = dict(TR, num_attention_heads=3, attention_head_dim=10, num_layers=3, text_dim=20, ffn_dim=40,
              in_channels=16, out_channels=6)
    return {
        "alt-wan21-i2v": dict(
            index=dict(_class_name="WanImageToVideoPipeline", boundary_ratio=None, expand_timesteps=False),
            vae=vae, shift=3.0, clip=clip, proc=proc,
            tr=dict(tr, image_dim=24, added_kv_proj_dim=30),
            cases={"i2v_pipeline": dict(size=(48, 32), frames=13, steps=3, guidance=6.0, text_len=512,
                                        image=(31, 57))}),
        "alt-wan21-flf2v": dict(
            index=dict(_class_name="WanImageToVideoPipeline", boundary_ratio=None, expand_timesteps=False),
            vae=vae, shift=3.0, clip=clip, proc=proc,
            tr=dict(tr, image_dim=24, added_kv_proj_dim=30, pos_embed_seq_len=2 * ((42 // 14) ** 2 + 1)),
            cases={"flf2v_pipeline": dict(size=(32, 48), frames=5, steps=2, guidance=3.0, text_len=512,
                                          image=(60, 40), last_image=(40, 60))}),
        "alt-wan22-i2v-a14b": dict(
            index=dict(_class_name="WanImageToVideoPipeline", boundary_ratio=0.85, expand_timesteps=False),
            vae=vae, shift=4.0, tr=dict(tr), experts=2,
            cases={"i2v_pipeline": dict(size=(48, 32), frames=13, steps=5, guidance=4.5, guidance2=2.5,
                                        text_len=9, image=(64, 64))}),
        "alt-wan22-ti2v": dict(
            index=dict(_class_name="WanPipeline", boundary_ratio=None, expand_timesteps=True),
            vae=vae22, shift=3.0, tr=dict(tr, in_channels=6, out_channels=6),
            cases={"ti2v_pipeline": dict(size=(64, 32), frames=9, steps=3, guidance=4.0, text_len=5,
                                         image=(40, 90))}),
    }


def randomize(module, gen):
    """Every parameter is its default initialisation plus 0.02·N(0, 1), as the wan-dev folder's
    (the default initialisation comes from torch's global generator, seeded by build)."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=gen))


def make_image(gen, w, h):
    """A smooth random RGB image (gradients plus noise), as 8-bit pixels."""
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    c = torch.rand(3, 4, generator=gen).numpy()
    noise = torch.rand(h, w, 3, generator=gen).numpy()
    img = np.stack([c[i, 0] + c[i, 1] * xx + c[i, 2] * yy + c[i, 3] * xx * yy for i in range(3)], -1)
    img = 0.7 * img / max(img.max(), 1e-6) + 0.3 * noise
    return PIL.Image.fromarray(np.clip(np.round(img * 255), 0, 255).astype(np.uint8), "RGB")


def save_config(path, cls, cfg):
    cfg = {k: v for k, v in cfg.items() if k != "_use_default_values"}  # a set: not reproducible
    conf = dict({"_class_name": cls, "_diffusers_version": "0.35.2"}, **cfg)
    with open(path, "w") as f:
        json.dump(conf, f, indent=2, sort_keys=True)


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def update(self, *a):
        pass


class Recorder:
    """Wraps the pipeline's modules and records what they get and return during __call__."""

    def __init__(self, pipe, out):
        self.out, self.calls, self.step = out, [], 0
        self.undo = []
        for i, tr in enumerate([pipe.transformer, pipe.transformer_2]):
            if tr is not None:
                self.wrap(tr, "forward", self.transformer_hook(i + 1))
        self.wrap(pipe.scheduler, "step", self.step_hook)
        if pipe.image_encoder is not None:
            self.wrap(pipe, "encode_image", self.encode_image_hook)
        self.wrap(pipe.video_processor, "preprocess", self.preprocess_hook)
        self.wrap(pipe, "prepare_latents", self.prepare_hook)
        self.wrap(pipe.vae, "decode", self.decode_hook)
        self.pipe = pipe
        self.preprocessed = 0

    def wrap(self, obj, name, hook):
        orig = getattr(obj, name)
        setattr(obj, name, lambda *a, **k: hook(orig, *a, **k))
        self.undo.append(lambda: delattr(obj, name))

    def restore(self):
        for u in self.undo:
            u()

    def transformer_hook(self, expert):
        def hook(orig, *a, **k):
            y = orig(*a, **k)
            self.calls.append((expert, y[0].clone()))
            return y
        return hook

    def step_hook(self, orig, model_output, timestep, sample, *a, **k):
        i = self.step
        cond = [c for c in self.calls]
        self.calls = []
        self.out["noise_pred_cond_step%d" % i] = cond[0][1]
        if len(cond) > 1:
            self.out["noise_pred_uncond_step%d" % i] = cond[1][1]
        self.out["noise_pred_step%d" % i] = model_output.clone()
        self.experts.append(cond[0][0])
        self.timesteps.append(float(timestep))
        y = orig(model_output, timestep, sample, *a, **k)
        self.out["latents_step%d" % i] = y[0].clone()
        self.step += 1
        return y

    def encode_image_hook(self, orig, image, device=None):
        px = self.pipe.image_processor(images=image, return_tensors="pt")["pixel_values"]
        self.out["clip_pixel_values"] = px.clone()
        emb = orig(image, device)
        self.out["image_embeds"] = emb.clone()
        return emb

    def preprocess_hook(self, orig, image, *a, **k):
        y = orig(image, *a, **k)
        self.out[["image_resized", "last_image_resized"][self.preprocessed]] = y.clone()
        self.preprocessed += 1
        return y

    def prepare_hook(self, orig, *a, **k):
        y = orig(*a, **k)
        if len(y) == 3:  # expand_timesteps: latents, condition latents, first-frame mask
            self.out["latent_condition"] = y[1].clone()
            self.out["first_frame_mask"] = y[2].clone()
        else:
            self.out["condition"] = y[1].clone()
        return y

    def decode_hook(self, orig, z, *a, **k):
        self.out["latents_denorm"] = z.clone()
        return orig(z, *a, **k)


def build(spec, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    vae = AutoencoderKLWan(**spec["vae"]).eval()
    randomize(vae, gen)
    trs = []
    for _ in range(spec.get("experts", 1)):
        tr = WanTransformer3DModel(**spec["tr"]).eval()
        randomize(tr, gen)
        trs.append(tr)
    sched = UniPCMultistepScheduler(**dict(UNIPC, flow_shift=spec["shift"]))
    enc = proc = None
    if "clip" in spec:
        enc = transformers.CLIPVisionModel(transformers.CLIPVisionConfig(**spec["clip"])).eval()
        randomize(enc, gen)
        proc = transformers.CLIPImageProcessor(**spec["proc"])
    return gen, vae, trs, sched, enc, proc


def write_folder(d, spec, vae, trs, sched, enc):
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    ix = spec["index"]
    index = {"_class_name": ix["_class_name"], "_diffusers_version": "0.35.2",
             "boundary_ratio": ix["boundary_ratio"], "expand_timesteps": ix["expand_timesteps"],
             "scheduler": ["diffusers", "UniPCMultistepScheduler"], "text_encoder": [None, None],
             "tokenizer": [None, None], "transformer": ["diffusers", "WanTransformer3DModel"],
             "transformer_2": ["diffusers", "WanTransformer3DModel"] if len(trs) > 1 else [None, None],
             "vae": ["diffusers", "AutoencoderKLWan"]}
    if ix["_class_name"] == "WanImageToVideoPipeline":
        index["image_encoder"] = ["transformers", "CLIPVisionModel"] if enc is not None else [None, None]
        index["image_processor"] = ["transformers", "CLIPImageProcessor"] if enc is not None else [None, None]
    with open(os.path.join(d, "model_index.json"), "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)
    for name, m in [("vae", vae)] + [(["transformer", "transformer_2"][i], t) for i, t in enumerate(trs)]:
        os.makedirs(os.path.join(d, name))
        cls = "AutoencoderKLWan" if name == "vae" else "WanTransformer3DModel"
        save_config(os.path.join(d, name, "config.json"), cls, dict(m.config))
        write_safetensors(os.path.join(d, name, "diffusion_pytorch_model.safetensors"),
                          {k: v.detach().numpy() for k, v in m.state_dict().items()})
    os.makedirs(os.path.join(d, "scheduler"))
    save_config(os.path.join(d, "scheduler", "scheduler_config.json"), "UniPCMultistepScheduler", dict(sched.config))
    if enc is not None:
        os.makedirs(os.path.join(d, "image_encoder"))
        cfg = dict(spec["clip"], architectures=["CLIPVisionModel"], model_type="clip_vision_model",
                   torch_dtype="float32", attention_dropout=0.0, initializer_factor=1.0, initializer_range=0.02)
        with open(os.path.join(d, "image_encoder", "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
        write_safetensors(os.path.join(d, "image_encoder", "model.safetensors"),
                          {k: v.detach().numpy() for k, v in enc.state_dict().items()})
        os.makedirs(os.path.join(d, "image_processor"))
        with open(os.path.join(d, "image_processor", "preprocessor_config.json"), "w") as f:
            json.dump(dict(spec["proc"], image_processor_type="CLIPImageProcessor"), f, indent=2, sort_keys=True)


def run_case(d, name, c, spec, gen, vae, trs, sched, enc, proc):
    h, w = c["size"]
    tr0 = spec["tr"]
    z = spec["vae"]["z_dim"]
    sf = vae.config.scale_factor_spatial
    tf = vae.config.scale_factor_temporal
    lat = [1, z, (c["frames"] - 1) // tf + 1, h // sf, w // sf]
    pe = torch.randn((1, c["text_len"], tr0["text_dim"]), generator=gen)
    ne = torch.randn((1, c["text_len"], tr0["text_dim"]), generator=gen)
    pe[:, max(1, c["text_len"] // 3):] = 0  # UMT5-style zero rows after the valid tokens
    ne[:, max(1, c["text_len"] // 5):] = 0
    latents = torch.randn(lat, generator=gen)
    image = make_image(gen, *c["image"])
    last = make_image(gen, *c["last_image"]) if "last_image" in c else None
    cd = os.path.join(d, "cases", name)
    os.makedirs(cd)
    image.save(os.path.join(cd, "image.png"))
    if last is not None:
        last.save(os.path.join(cd, "last_image.png"))
    image = PIL.Image.open(os.path.join(cd, "image.png"))
    if last is not None:
        last = PIL.Image.open(os.path.join(cd, "last_image.png"))
    ix = spec["index"]
    pipe = WanImageToVideoPipeline(tokenizer=None, text_encoder=None, vae=vae, scheduler=sched,
                                   image_processor=proc, image_encoder=enc, transformer=trs[0],
                                   transformer_2=trs[1] if len(trs) > 1 else None,
                                   boundary_ratio=ix["boundary_ratio"], expand_timesteps=ix["expand_timesteps"])
    pipe.progress_bar = lambda iterable=None, total=None: _NoBar()  # tqdm is an import stub here
    kw = dict(image=image, last_image=last, prompt_embeds=pe, negative_prompt_embeds=ne, height=h, width=w,
              num_frames=c["frames"], num_inference_steps=c["steps"], guidance_scale=c["guidance"])
    if "guidance2" in c:
        kw["guidance_scale_2"] = c["guidance2"]
    out = {}
    rec = Recorder(pipe, out)
    rec.experts, rec.timesteps = [], []
    with torch.no_grad():
        final = pipe(latents=latents.clone(), output_type="latent", **kw).frames
        n_steps = rec.step
        rec.restore()
        frames_plain = pipe(latents=latents.clone(), output_type="np", **kw).frames
        rec = Recorder(pipe, out)
        rec.experts, rec.timesteps = [], []
        frames = pipe(latents=latents.clone(), output_type="np", **kw).frames
        rec.restore()
    assert rec.step == n_steps == c["steps"], (rec.step, n_steps)
    out["latents_final"] = final
    out["frames"] = torch.from_numpy(np.asarray(frames))
    out["timesteps"] = torch.tensor(rec.timesteps, dtype=torch.float32)
    out["sigmas"] = sched.sigmas.clone().float()
    out["experts"] = torch.tensor(rec.experts, dtype=torch.float32)
    if len(trs) > 1:
        assert 1 in rec.experts and 2 in rec.experts, ("both experts should run", rec.experts)
    same = bool(np.array_equal(np.asarray(frames_plain), np.asarray(frames)))
    assert same, "the instrumented call changed the frames"
    inputs = {"prompt_embeds": pe, "negative_prompt_embeds": ne, "latents": latents}
    write_safetensors(os.path.join(cd, "inputs.safetensors"), {k: v.numpy().astype(np.float32) for k, v in inputs.items()})
    write_safetensors(os.path.join(cd, "outputs.safetensors"),
                      {k: v.detach().numpy().astype(np.float32) for k, v in out.items()})
    args = {"call": "WanImageToVideoPipeline(...)(image=image.png%s, prompt_embeds=..., negative_prompt_embeds=..., "
                    "latents=..., output_type='latent' and 'np')" % (", last_image=last_image.png" if last else ""),
            "image": "image.png", "height": h, "width": w, "num_frames": c["frames"],
            "num_inference_steps": c["steps"], "guidance_scale": c["guidance"], "batch_size": 1,
            "boundary_ratio": ix["boundary_ratio"], "expand_timesteps": ix["expand_timesteps"],
            "experts_per_step": rec.experts, "timesteps": rec.timesteps,
            "uninstrumented_call_bitwise_equal": same}
    if last is not None:
        args["last_image"] = "last_image.png"
    if "guidance2" in c:
        args["guidance_scale_2"] = c["guidance2"]
    meta = {"case": "i2v_pipeline", "diffusers": TAG, "torch": torch.__version__, "numpy": np.__version__,
            "pillow": PIL.__version__, "reference": REFERENCE,
            "shims": sorted(set(s for s in SHIMS if not s.startswith("import stub"))), "args": args,
            "inputs": {k: {"shape": list(v.shape)} for k, v in inputs.items()},
            "outputs": {k: {"shape": list(v.shape), "rms": float(v.double().pow(2).mean().sqrt())}
                        for k, v in sorted(out.items())}}
    with open(os.path.join(cd, "case.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
    print(os.path.basename(d), name, "steps", rec.step, "experts", rec.experts, "frames", list(out["frames"].shape))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--alt", action="store_true", help="folders of other sizes (not committed)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for i, (vname, spec) in enumerate(sorted(variants(a.alt).items())):
        gen, vae, trs, sched, enc, proc = build(spec, 7000 + i + (100 if a.alt else 0))
        d = os.path.join(a.out, vname)
        write_folder(d, spec, vae, trs, sched, enc)
        for name, c in sorted(spec["cases"].items()):
            run_case(d, name, c, spec, gen, vae, trs, sched, enc, proc)


if __name__ == "__main__":
    main()
