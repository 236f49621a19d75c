"""Where two runs of one trial first differ (the benchmark's agreement table)."""

import numpy as np

from getagrip_ros.trials.compare import _machines, first_difference, format_markdown


def _run(**changes):
    run = {"images": [np.zeros(12, np.uint8), np.ones(12, np.uint8)], "cloud": np.zeros((5, 3), np.float32),
           "candidates": np.zeros((3, 37)), "chosen": np.zeros((1, 37)), "final_z_m": 0.2}
    run.update(changes)
    return run


def test_the_first_stage_whose_products_differ_is_named():
    assert first_difference(_run(), _run()) == ""
    assert first_difference(_run(), _run(images=[np.zeros(12, np.uint8)])) == "capture: 2 vs 1 images"
    other = [np.zeros(12, np.uint8), np.full(12, 3, np.uint8)]
    assert first_difference(_run(), _run(images=other)) == "capture: image 1 differs (mean |diff| 2.000 of 255)"
    assert first_difference(_run(), _run(cloud=np.ones((5, 3), np.float32))).startswith("perception: object clouds differ")
    moved = np.zeros((3, 37))
    moved[2, 0] = 1e-3
    assert first_difference(_run(), _run(candidates=moved)).startswith("grasp planning: ranked grasps differ (max |diff| 1.00e-03")
    chosen = np.ones((1, 37))
    assert first_difference(_run(), _run(chosen=chosen)) == "motion planning: another grasp was chosen"
    assert first_difference(_run(), _run(final_z_m=0.05)) == "execution: the object ended at z = 0.200 vs 0.050 m"
    assert first_difference(_run(), _run(final_z_m=0.2015)) == ""  # the same lift, sampled at another moment of the hold


def test_trials_from_other_kinds_of_cpu_are_flagged():
    """Runs of one protocol agree bit for bit on one machine; on a CPU with other vector instructions the math
    libraries' kernels change the floats, so the agreement table says when the two bags come from different CPUs."""
    here = {"cpu": "Xeon", "x86_level": "x86-64-v4", "torch_cpu_capability": "AVX512"}
    assert _machines(here, dict(here)) == "" and _machines(here, None) == ""
    other = {**here, "x86_level": "x86-64-v3", "OPENBLAS_CORETYPE": "Haswell"}
    assert _machines(here, other) == "OPENBLAS_CORETYPE None vs 'Haswell'; x86_level 'x86-64-v4' vs 'x86-64-v3'"
    row = {"object": "tabletop20/goblet", "a": {"success": True, "status": "SUCCEEDED", "stage": "done"},
           "b": {"success": False, "status": "NO_RESULT", "stage": "done"}, "agree": False,
           "first_difference": "capture: image 0 differs (mean |diff| 21.851 of 255)", "machines": _machines(here, other)}
    line = format_markdown({"trials": [row]}).splitlines()[-1]
    assert line.startswith("| goblet | lifted | no_result (done) | **no** | capture: image 0 differs")
    assert "(other machines: OPENBLAS_CORETYPE None vs 'Haswell'; x86_level" in line
