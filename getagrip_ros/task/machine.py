"""The machine a result was computed on: its CPU and the kernels the math libraries chose (recorded with each trial
and benchmark, so runs from different CPUs are not compared as if they were one)."""

from __future__ import annotations

import ctypes
import glob
import os
import platform
from typing import Any

import numpy as np


KERNEL_ENV = ("OPENBLAS_CORETYPE", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")
"""Environment variables that choose the math libraries' CPU kernels (recorded when set)."""


def _numpy_blas_core() -> str:
    """The CPU kernels numpy's bundled OpenBLAS chose at load (e.g. "SkylakeX", "Haswell"; "" when not found)."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in glob.glob(os.path.join(libs, "libscipy_openblas*.so*")):
        for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            try:
                corename = getattr(ctypes.CDLL(path), symbol)
            except (AttributeError, OSError):
                continue
            corename.restype = ctypes.c_char_p
            return (corename() or b"").decode()
    return ""


def machine() -> dict[str, Any]:
    """The CPU a result was computed on (recorded with each trial). Runs of one protocol are identical on one
    machine; on a CPU with other vector instructions the math libraries take other kernels, the last bits of
    the floats change (from the first image on) and outcomes near a threshold can flip (README "The grasp
    benchmark")."""
    import torch

    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # numpy < 2
        features = {}

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    levels = [level for level in ("X86_V2", "X86_V3", "X86_V4") if features.get(level)]
    return {"cpu": cpu, "cores": os.cpu_count(), "x86_level": levels[-1].lower().replace("_v", "-64-v") if levels else "",
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "numpy_blas_core": _numpy_blas_core(),
            **{k: os.environ[k] for k in KERNEL_ENV if k in os.environ}}
