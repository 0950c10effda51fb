#!/usr/bin/python3
"""Reference cases for vdpp's schedulers (package sched).

Executes diffusers v0.35.2's schedulers, unmodified, on Debian's python3-torch 1.13 (shims.py
adds only import-time names here), and writes one case folder per configuration in the layout
of shared/golden/wan-dev/cases/scheduler_*: case.json (args.config, args.num_inference_steps,
args.mu, args.scheduler), inputs.safetensors (sample, model_output_step{i}, and noise_step{i}
for the schedulers that draw noise) and outputs.safetensors (timesteps, sigmas,
sample_step{i} = step(model_output_step{i}, timesteps[i], sample_step{i-1})).

The schedulers and how each is set up:
  - UniPCMultistepScheduler, FlowMatchEulerDiscreteScheduler: from args.config,
    set_timesteps(num_inference_steps[, mu]).
  - DPMSolverMultistepScheduler: from args.config (flow sigmas, as Wan users configure it).
  - FlowMatchLCMScheduler: from args.config, set_timesteps(sigmas=args.sigmas), the
    unshifted schedule 1 - k/n of the step-distilled Wan LoRAs (lightx2v's
    denoising_step_list 1000, 750, 500, 250 for n = 4); the scheduler shifts it.
  - EDMDPMSolverMultistepScheduler: from args.config (Stable Video Diffusion's EDM
    preconditioning: sigma_data 1, v-prediction, Karras sigmas between sigma_min and sigma_max).
  - EulerDiscreteScheduler: from args.config (the SVD folder's).
  - EulerAncestralDiscreteScheduler: its step() on the schedule of the EulerDiscreteScheduler
    of args.config (its sigmas and timesteps are replaced by those of that scheduler after
    set_timesteps): diffusers' ancestral scheduler has neither Karras sigmas nor continuous
    timesteps, which an SVD UNet needs.
For the schedulers that draw noise in step() (the ancestral and LCM ones) the generator's
draw is recorded first (noise_step{i}) and the generator rewound, so step() draws the same
noise. Where the scheduler has scale_model_input, model_input_step{i} is its output for the
sample step i starts from, and init_noise_sigma is recorded.

Usage (from the repository root; diffusers comes from the mirror, see common.py):
  /usr/bin/python3 scripts/wanref/scheduler_cases.py sched/schedparity/testdata [PREFIX...]
writes every case, or those whose names start with one of the PREFIXes. (The UniPC cases of
order 3 and more go through torch.linalg.solve, whose last bit depends on the CPU's LAPACK
kernels: the committed ones were made on an AVX2 machine.)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import import_diffusers, write_safetensors  # noqa: E402

import_diffusers()  # shims first, then diffusers v0.35.2 on sys.path

import numpy as np  # noqa: E402
import torch  # noqa: E402

# The Wan 2.2 scheduler_config.json (shared/golden/wan-dev/scheduler) without bookkeeping keys.
WAN_UNIPC = {
    "num_train_timesteps": 1000, "beta_start": 0.0001, "beta_end": 0.02, "beta_schedule": "linear",
    "prediction_type": "flow_prediction", "use_flow_sigmas": True, "flow_shift": 3.0,
    "solver_order": 2, "solver_type": "bh2", "lower_order_final": True, "timestep_spacing": "linspace",
    "final_sigmas_type": "zero", "predict_x0": True, "steps_offset": 0, "disable_corrector": [],
    "use_karras_sigmas": False, "use_exponential_sigmas": False, "use_dynamic_shifting": False,
    "time_shift_type": "exponential",
}
PLAIN_UNIPC = {"num_train_timesteps": 1000, "beta_start": 0.00085, "beta_end": 0.012}


def unipc(name, steps, mu=None, base=WAN_UNIPC, **over):
    return name, "UniPCMultistepScheduler", dict(base, **over), steps, mu


def flow(name, steps, mu=None, **over):
    return name, "FlowMatchEulerDiscreteScheduler", dict({"num_train_timesteps": 1000, "shift": 3.0}, **over), steps, mu


# The Stable Video Diffusion scheduler_config.json (shared/golden/dev/scheduler) without
# bookkeeping keys.
SVD_EULER = {
    "num_train_timesteps": 1000, "beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear",
    "prediction_type": "v_prediction", "interpolation_type": "linear", "use_karras_sigmas": True,
    "sigma_min": 0.002, "sigma_max": 700.0, "steps_offset": 1, "timestep_spacing": "leading",
    "timestep_type": "continuous",
}
# EDMDPMSolverMultistepScheduler as an SVD UNet needs it: sigma_data 1 (c_in = 1/sqrt(sigma^2+1),
# c_skip = 1/(sigma^2+1), c_out = -sigma/sqrt(sigma^2+1)), c_noise = 0.25 ln sigma.
SVD_EDM_DPM = {
    "sigma_min": 0.002, "sigma_max": 700.0, "sigma_data": 1.0, "sigma_schedule": "karras",
    "num_train_timesteps": 1000, "prediction_type": "v_prediction", "rho": 7.0, "solver_order": 2,
    "algorithm_type": "dpmsolver++", "solver_type": "midpoint", "lower_order_final": True,
    "euler_at_final": False, "final_sigmas_type": "zero",
}
# DPMSolverMultistepScheduler with flow sigmas (DPM++ 2M on a flow model).
FLOW_DPM = {
    "num_train_timesteps": 1000, "prediction_type": "flow_prediction", "use_flow_sigmas": True,
    "flow_shift": 3.0, "solver_order": 2, "algorithm_type": "dpmsolver++", "solver_type": "midpoint",
    "lower_order_final": True, "euler_at_final": False, "final_sigmas_type": "zero",
}


def dpm(name, steps, **over):
    return name, "DPMSolverMultistepScheduler", dict(FLOW_DPM, **over), steps, None


def edm(name, steps, **over):
    return name, "EDMDPMSolverMultistepScheduler", dict(SVD_EDM_DPM, **over), steps, None


def lcm(name, steps, shift=5.0):
    return name, "FlowMatchLCMScheduler", {"num_train_timesteps": 1000, "shift": shift}, steps, None


def euler(name, steps, **over):
    return name, "EulerDiscreteScheduler", dict(SVD_EULER, **over), steps, None


def ancestral(name, steps, **over):
    return name, "EulerAncestralDiscreteScheduler", dict(SVD_EULER, **over), steps, None


CASES = [
    unipc("scheduler_unipc_n1", 1),
    unipc("scheduler_unipc_n2", 2),
    unipc("scheduler_unipc_n3", 3),
    unipc("scheduler_unipc_n7", 7),
    unipc("scheduler_unipc_n50", 50),
    unipc("scheduler_unipc_order1_n7", 7, solver_order=1),
    unipc("scheduler_unipc_order3_n9", 9, solver_order=3),
    unipc("scheduler_unipc_order4_n9", 9, solver_order=4),
    unipc("scheduler_unipc_bh1_order3_sigma_min_n8", 8, solver_order=3, solver_type="bh1", final_sigmas_type="sigma_min"),
    unipc("scheduler_unipc_bh1_order2_sigma_min_n6", 6, solver_type="bh1", final_sigmas_type="sigma_min"),
    unipc("scheduler_unipc_sigma_min_n7", 7, final_sigmas_type="sigma_min"),
    unipc("scheduler_unipc_no_lower_order_final_sigma_min_n6", 6, solver_order=3, lower_order_final=False, final_sigmas_type="sigma_min"),
    unipc("scheduler_unipc_shift5_n10", 10, flow_shift=5.0),
    unipc("scheduler_unipc_shift1_n5", 5, flow_shift=1.0),
    unipc("scheduler_unipc_trailing_shift12_n6", 6, flow_shift=12.0, timestep_spacing="trailing"),
    unipc("scheduler_unipc_disable_corrector_n7", 7, disable_corrector=[0, 3]),
    unipc("scheduler_unipc_dynamic_mu_n7", 7, mu=0.8, use_dynamic_shifting=True),
    unipc("scheduler_unipc_eps_linspace_n10", 10, base=PLAIN_UNIPC, beta_schedule="scaled_linear"),
    unipc("scheduler_unipc_eps_leading_offset_n7", 7, base=PLAIN_UNIPC, timestep_spacing="leading", steps_offset=1, final_sigmas_type="sigma_min"),
    unipc("scheduler_unipc_v_trailing_karras_n8", 8, base=PLAIN_UNIPC, prediction_type="v_prediction", timestep_spacing="trailing", use_karras_sigmas=True, solver_order=3),
    unipc("scheduler_unipc_eps_trailing_n7", 7, base=PLAIN_UNIPC, timestep_spacing="trailing", solver_type="bh1"),
    unipc("scheduler_unipc_sample_cosine_exponential_n6", 6, base=PLAIN_UNIPC, prediction_type="sample", beta_schedule="squaredcos_cap_v2", use_exponential_sigmas=True),
    unipc("scheduler_unipc_eps_noise_pred_n7", 7, base=PLAIN_UNIPC, predict_x0=False, solver_order=3),
    unipc("scheduler_unipc_v_noise_pred_karras_sigma_min_n6", 6, base=PLAIN_UNIPC, prediction_type="v_prediction", predict_x0=False, use_karras_sigmas=True, final_sigmas_type="sigma_min"),
    flow("scheduler_flow_euler_n1", 1),
    flow("scheduler_flow_euler_n2", 2),
    flow("scheduler_flow_euler_n3", 3),
    flow("scheduler_flow_euler_n7", 7),
    flow("scheduler_flow_euler_n50", 50),
    flow("scheduler_flow_euler_shift1_n7", 7, shift=1.0),
    flow("scheduler_flow_euler_shift7_n10", 10, shift=7.0),
    flow("scheduler_flow_euler_dynamic_exp_n7", 7, mu=1.2, use_dynamic_shifting=True),
    flow("scheduler_flow_euler_dynamic_linear_n7", 7, mu=1.5, use_dynamic_shifting=True, time_shift_type="linear"),
    flow("scheduler_flow_euler_shift_terminal_n8", 8, shift_terminal=0.1),
    flow("scheduler_flow_euler_karras_n7", 7, use_karras_sigmas=True),
    flow("scheduler_flow_euler_exponential_n7", 7, use_exponential_sigmas=True),
    dpm("scheduler_dpm_flow_n1", 1),
    dpm("scheduler_dpm_flow_n2", 2),
    dpm("scheduler_dpm_flow_n4", 4),
    dpm("scheduler_dpm_flow_n20", 20),
    dpm("scheduler_dpm_flow_shift5_n7", 7, flow_shift=5.0),
    dpm("scheduler_dpm_flow_order1_n6", 6, solver_order=1),
    dpm("scheduler_dpm_flow_heun_n7", 7, solver_type="heun"),
    dpm("scheduler_dpm_flow_euler_at_final_n5", 5, euler_at_final=True, lower_order_final=False),
    lcm("scheduler_flow_lcm_n1", 1),
    lcm("scheduler_flow_lcm_n2", 2),
    lcm("scheduler_flow_lcm_n4", 4),
    lcm("scheduler_flow_lcm_shift3_n8", 8, shift=3.0),
    edm("scheduler_edm_dpm_svd_n1", 1),
    edm("scheduler_edm_dpm_svd_n5", 5),
    edm("scheduler_edm_dpm_svd_n25", 25),
    edm("scheduler_edm_dpm_svd_order1_n6", 6, solver_order=1),
    edm("scheduler_edm_dpm_svd_heun_n7", 7, solver_type="heun"),
    edm("scheduler_edm_dpm_svd_eps_n7", 7, prediction_type="epsilon"),
    euler("scheduler_euler_svd_n7", 7),
    euler("scheduler_euler_svd_n25", 25),
    ancestral("scheduler_euler_ancestral_svd_n1", 1),
    ancestral("scheduler_euler_ancestral_svd_n5", 5),
    ancestral("scheduler_euler_ancestral_svd_n25", 25),
]

SAMPLE_SHAPE = (2, 3, 1, 2, 4)  # batch 2, odd channel count: nothing depends on the Wan shapes


# The schedulers whose step() draws noise from its generator.
NOISY = {"FlowMatchLCMScheduler", "EulerAncestralDiscreteScheduler"}


def lcm_sigmas(steps):
    """The unshifted step-distillation schedule 1 - k/n (k < n)."""
    return [1.0 - k / steps for k in range(steps)]


def make_scheduler(kind, config, steps, mu):
    import diffusers.schedulers as S

    s = getattr(S, kind).from_config(config)
    if kind == "EulerAncestralDiscreteScheduler":
        e = S.EulerDiscreteScheduler.from_config(config)
        e.set_timesteps(steps)
        s.set_timesteps(steps)
        s.sigmas, s.timesteps = e.sigmas.clone(), e.timesteps.clone()
        s.euler_init_noise_sigma = e.init_noise_sigma
    elif kind == "FlowMatchLCMScheduler":
        s.set_timesteps(sigmas=lcm_sigmas(steps))
    elif mu is None:
        s.set_timesteps(steps)
    else:
        s.set_timesteps(steps, mu=mu)
    return s


def run_case(out_dir, name, kind, config, steps, mu, seed):
    s = make_scheduler(kind, config, steps, mu)
    g = torch.Generator().manual_seed(seed)
    sample = torch.randn(SAMPLE_SHAPE, generator=g)
    inputs, outputs = {"sample": sample.numpy().copy()}, {}
    x = sample
    new = kind not in ("UniPCMultistepScheduler", "FlowMatchEulerDiscreteScheduler")
    for i, t in enumerate(s.timesteps):
        mo = torch.randn(SAMPLE_SHAPE, generator=g)
        inputs[f"model_output_step{i}"] = mo.numpy().copy()
        if new and hasattr(s, "scale_model_input"):
            outputs[f"model_input_step{i}"] = s.scale_model_input(x, t).numpy().copy()
        kw = {}
        if kind in NOISY:
            state = g.get_state()
            inputs[f"noise_step{i}"] = torch.randn(SAMPLE_SHAPE, generator=g, dtype=torch.float32).numpy().copy()
            g.set_state(state)
            kw["generator"] = g
        x = s.step(mo, t, x, **kw).prev_sample
        outputs[f"sample_step{i}"] = x.numpy().copy()
    outputs["timesteps"] = s.timesteps.to(torch.float32).numpy()
    outputs["sigmas"] = s.sigmas.numpy().astype(np.float32)
    if new and kind != "FlowMatchLCMScheduler":
        ins = getattr(s, "euler_init_noise_sigma", s.init_noise_sigma)
        outputs["init_noise_sigma"] = np.array([float(ins)], dtype=np.float32)
    assert all(float(a) == float(b) for a, b in zip(outputs["timesteps"], s.timesteps)), "timesteps not exact in float32"
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "inputs.safetensors"), inputs)
    write_safetensors(os.path.join(d, "outputs.safetensors"), outputs)
    case = {
        "case": name,
        "args": {"scheduler": kind, "config": config, "num_inference_steps": steps, "mu": mu, "seed": seed,
                 "note": "set_timesteps(num_inference_steps[, mu]); then step(model_output_step{i}, timesteps[i], sample) for every step i, feeding each output back as the next sample"},
        "nan_outputs": sorted(k for k, v in outputs.items() if np.isnan(v).any()),
    }
    if kind == "FlowMatchLCMScheduler":
        case["args"]["sigmas"] = lcm_sigmas(steps)
        case["args"]["note"] = "set_timesteps(sigmas=args.sigmas); then step(model_output_step{i}, timesteps[i], sample, generator) for every step i, the generator drawing noise_step{i}"
    elif kind == "EulerAncestralDiscreteScheduler":
        case["args"]["note"] = "EulerDiscreteScheduler(config).set_timesteps(n)'s sigmas and timesteps replace the ancestral scheduler's; then step(model_output_step{i}, timesteps[i], sample, generator) for every step i, the generator drawing noise_step{i}"
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(case, f, indent=1, sort_keys=True)
        f.write("\n")
    return case


def main():
    out_dir = sys.argv[1]
    import diffusers

    assert diffusers.__version__ == "0.35.2", diffusers.__version__
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    prefixes = sys.argv[2:]
    for seed, (name, kind, config, steps, mu) in enumerate(CASES):
        if prefixes and not any(name.startswith(p) for p in prefixes):
            continue
        case = run_case(out_dir, name, kind, config, steps, mu, 1000 + seed)
        print(name, "NaN:" if case["nan_outputs"] else "", " ".join(case["nan_outputs"]))


if __name__ == "__main__":
    main()
