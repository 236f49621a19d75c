"""Pictures of results: grasps on objects, trial outcomes."""
