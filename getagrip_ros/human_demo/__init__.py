"""Grasp like a human: a human grasp demonstration (21 keypoints or a MANO mesh) turned into an Allegro grasp."""
