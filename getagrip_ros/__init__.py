"""getagrip_ros: multi-finger grasping of unknown objects (FR3 + Allegro + ZED 2i), after Get a Grip."""

import os

__version__ = "0.1.0"

# Headless rendering: MuJoCo picks its OpenGL backend when it is first imported. Default to EGL
# (OSMesa: MUJOCO_GL=osmesa) unless the user chose one.
os.environ.setdefault("MUJOCO_GL", "egl")
