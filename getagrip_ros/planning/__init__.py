"""Grasp planning: samplers, evaluators, refinement, and the planner that chains them."""
