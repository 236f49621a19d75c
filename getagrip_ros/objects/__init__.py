"""Objects to grasp: procedural shapes (the full catalog arrives with the simulated world)."""
