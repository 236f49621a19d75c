"""Learned grasp models (pure torch): BPS evaluator, BPS diffusion sampler, NeRF evaluator, checkpoints."""
