"""Both packages build with colcon in a ROS 2 workspace, and the installed node runs from the install space."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from getagrip_ros.ros.processes import NodeProcess

ROOT = Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns(".venv", "build", "install", "log", ".git", "outputs", "__pycache__", "*.egg-info",
                                ".pytest_cache")


def test_colcon_builds_both_packages_and_the_installed_node_runs(tmp_path, ros_env):
    venv = Path(sys.prefix)
    colcon = venv / "bin" / "colcon"
    if not colcon.exists():
        pytest.fail("colcon is missing from the venv: run scripts/setup.sh")
    ws = tmp_path / "ws"
    shutil.copytree(ROOT, ws / "src" / "getagrip_ros", ignore=IGNORE)
    env = {**ros_env, "AMENT_PREFIX_PATH": str(venv), "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    build = subprocess.run([str(colcon), "build", "--paths", "src/getagrip_ros", "src/getagrip_ros/getagrip_interfaces"],
                           cwd=ws, env=env, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0 and "2 packages finished" in build.stdout, build.stdout[-3000:] + build.stderr[-3000:]
    share = ws / "install" / "getagrip_ros" / "share" / "getagrip_ros"
    for rel in ("urdf/fr3_algr_zed2i.urdf", "urdf/allegro_right.urdf", "config/plan_grasp.yaml",
                "config/fr3_algr_zed2i_curobo.yml", "launch/planner.launch.py", "package.xml", "rviz/getagrip.rviz",
                "foxglove/getagrip_trial_layout.json"):
        assert (share / rel).is_file(), rel
    node = ws / "install" / "getagrip_ros" / "lib" / "getagrip_ros" / "plan_grasp_node"
    assert node.is_file()

    # Start the installed node from outside the source tree with the workspace sourced.
    probe = ("import getagrip_ros, getagrip_interfaces; from getagrip_ros.paths import share_dir; "
             "print(getagrip_ros.__file__); print(getagrip_interfaces.__file__); print(share_dir())")
    sourced = f"source {ws}/install/setup.bash && "
    out = subprocess.run(["bash", "-c", sourced + f"python -c '{probe}'"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(str(ws / "install")) == 3, out.stdout
    node_proc = NodeProcess("plan_grasp_node", command=["bash", "-c", sourced + f"exec {node}"], env=env, cwd=tmp_path)
    with node_proc:
        assert node_proc.wait_for_output("plan_grasp ready", timeout_s=60), node_proc.output()
    assert node_proc.process.returncode == 0, node_proc.output()
