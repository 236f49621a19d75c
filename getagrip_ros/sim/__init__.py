"""The simulated world (MuJoCo): robot, table, wrist camera and one object; ground truth for every stage."""
