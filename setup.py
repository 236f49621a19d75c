"""getagrip_ros: an ament_python package (also installable with pip)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "getagrip_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    package_data={PACKAGE: ["py.typed", "models/weights/*"]},  # the shipped models (getagrip_ros.models.shipped)
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.yml")),
        (f"share/{PACKAGE}/urdf", glob("urdf/*.urdf")),
        (f"share/{PACKAGE}/rviz", glob("rviz/*.rviz")),  # ros2 launch ... rviz:=true
        (f"share/{PACKAGE}/foxglove", glob("foxglove/*.json")),  # Foxglove layouts for trial bags
    ],
    install_requires=["setuptools"],
    extras_require={"ray": ["ray>=2.9"]},  # getagrip-generate --ray: the data engine on a Ray cluster
    zip_safe=False,  # the shipped models are read as files
    maintainer="getagrip_ros maintainers",
    maintainer_email="maintainers@getagrip-ros.invalid",
    description="ROS 2 multi-finger grasping stack (FR3 + Allegro + ZED 2i) after Get a Grip.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "plan_grasp_node = getagrip_ros.ros.plan_grasp_node:main",
            "robot_node = getagrip_ros.ros.robot_node:main",
            "train_nerf_node = getagrip_ros.ros.train_nerf_node:main",
            "extract_object_node = getagrip_ros.ros.extract_object_node:main",
            "getagrip-perception = getagrip_ros.cli.perception:main",
            "getagrip-plan-grasps = getagrip_ros.cli.plan_grasps:main",
            "getagrip-demo = getagrip_ros.demo:main",
            "getagrip-train = getagrip_ros.cli.train:main",
            "getagrip-generate = getagrip_ros.cli.generate:main",
            "getagrip = getagrip_ros.cli.getagrip:main",
            "grasp_task_node = getagrip_ros.ros.grasp_task_node:main",
        ],
    },
)
