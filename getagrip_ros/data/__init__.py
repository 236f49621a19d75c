"""The data engine: grasp labels in simulation, datasets."""
