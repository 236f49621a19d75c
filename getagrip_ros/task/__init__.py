"""The whole grasp task on one object: stages in order, per-stage budgets, cancel, one recorded trial each."""
