"""Fixtures for the object catalog tests: every cache lives in a temp dir, never in ~/.cache."""

import pytest

from getagrip_ros.objects.mesh_object import DecompositionConfig, PrepareConfig


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """One convex-decomposition cache for the whole run (real CoACD results are reused across tests)."""
    return str(tmp_path_factory.mktemp("convex_cache"))


@pytest.fixture
def hull_only(tmp_path):
    """Config that treats every mesh as convex (one hull part, no CoACD): fast checks of everything else."""
    return PrepareConfig(decomposition=DecompositionConfig(convex_volume_ratio=0.0), cache_dir=str(tmp_path))
