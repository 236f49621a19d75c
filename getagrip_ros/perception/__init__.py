"""Perception: capture trajectories, NeRF, and the object representations (cloud, BPS, mesh) the planners need."""
