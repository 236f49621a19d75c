"""Training of the learned grasp models (BPS evaluator, BPS sampler, NeRF evaluator) from HDF5 datasets."""
