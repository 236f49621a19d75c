"""getagrip_ros: multi-finger grasping of unknown objects (FR3 + Allegro + ZED 2i), after Get a Grip."""

__version__ = "0.1.0"
