"""Trial bags: one ROS 2 bag (mcap storage) per trial, written as it happens.

Messages are rosbags dataclasses (``typestore.types[...]``; see `trials.messages`), serialised to CDR
with the ROS 2 Jazzy typestore plus this stack's own message types. Every message goes straight to the
file (no chunk buffering) and is flushed, and ``metadata.yaml`` is rewritten whenever a topic appears
and at close, so a crashed run leaves a bag whose messages up to the crash can be read:
`read_bag` reads complete and truncated bags alike (a finished bag is also a standard rosbag2 bag that
`ros2 bag info` and the rosbags readers accept; after a crash `ros2 bag reindex` rebuilds its summary).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from mcap.exceptions import McapError
from mcap.records import Channel, Message, Schema
from mcap.stream_reader import StreamReader
from mcap.writer import CompressionType, Writer

from getagrip_ros.serialization import json_default

BAG_FORMAT_VERSION = 9  # rosbag2 metadata version (Jazzy)
METADATA_NAME = "getagrip_trial"
"""Name of the mcap metadata record holding the trial's metadata (also on the /trial/metadata topic)."""
OWN_MESSAGES = ("Grasp", "ObjectState", "Status", "StageTiming")


def _interfaces_msg_dir() -> Path:
    """share/getagrip_interfaces/msg of the installed interfaces (venv prefix, colcon install or /opt/ros)."""
    import getagrip_interfaces

    candidates = [Path(getagrip_interfaces.__file__).resolve().parents[4] / "share" / "getagrip_interfaces" / "msg"]
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory("getagrip_interfaces")) / "msg")
    except (LookupError, OSError):
        pass
    candidates.append(Path(__file__).resolve().parents[2] / "getagrip_interfaces" / "msg")  # source checkout
    for path in candidates:
        if (path / "Grasp.msg").exists():
            return path
    raise FileNotFoundError(f"getagrip_interfaces .msg files not found in {[str(c) for c in candidates]}")


@lru_cache(maxsize=1)
def typestore():
    """The ROS 2 Jazzy typestore with getagrip_interfaces' messages registered."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    msg_dir = _interfaces_msg_dir()
    types: dict = {}
    for name in OWN_MESSAGES:
        types.update(get_types_from_msg((msg_dir / f"{name}.msg").read_text(), f"getagrip_interfaces/msg/{name}"))
    store.register(types)
    return store


def _ros_msgdef(msgtype: str) -> str:
    """The concatenated message definition rosbag2 stores as the mcap schema (ros2msg encoding)."""
    return typestore().generate_msgdef(msgtype, ros_version=2)[0]


def _metadata_yaml(bag_file: str, topics: dict[str, dict], start_ns: int, end_ns: int) -> str:
    import yaml

    info = {
        "version": BAG_FORMAT_VERSION, "storage_identifier": "mcap", "relative_file_paths": [bag_file],
        "duration": {"nanoseconds": max(end_ns - start_ns, 0)}, "starting_time": {"nanoseconds_since_epoch": start_ns},
        "message_count": sum(t["count"] for t in topics.values()),
        "topics_with_message_count": [
            {"topic_metadata": {"name": name, "type": t["type"], "serialization_format": "cdr",
                                "offered_qos_profiles": [], "type_description_hash": ""},
             "message_count": t["count"]} for name, t in topics.items()],
        "compression_format": "", "compression_mode": "",
        "files": [{"path": bag_file, "starting_time": {"nanoseconds_since_epoch": start_ns},
                   "duration": {"nanoseconds": max(end_ns - start_ns, 0)},
                   "message_count": sum(t["count"] for t in topics.values())}],
        "custom_data": {}, "ros_distro": "jazzy",
    }
    return yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False)


class TrialBagWriter:
    """Writes one trial bag: a directory with ``<name>_0.mcap`` and ``metadata.yaml``.

    ``write(topic, msg)`` takes a rosbags message dataclass; the topic's type is fixed by its first message.
    Use as a context manager; `close` may be called more than once.
    """

    def __init__(self, bag_dir: str | Path, trial_metadata: dict[str, Any]) -> None:
        self.path = Path(bag_dir)
        if self.path.exists():
            raise FileExistsError(f"trial bag {self.path} exists already (one bag per trial)")
        self.path.mkdir(parents=True)
        self.file_name = f"{self.path.name}_0.mcap"
        self._file = open(self.path / self.file_name, "wb")
        self._mcap = Writer(self._file, use_chunking=False, compression=CompressionType.NONE)
        self._mcap.start(profile="ros2", library="getagrip_ros")
        self._channels: dict[str, int] = {}
        self._schemas: dict[str, int] = {}
        self._topics: dict[str, dict] = {}
        self._start_ns = self._end_ns = time.time_ns()
        self.closed = False
        self._mcap.add_metadata(METADATA_NAME, {k: json.dumps(v) for k, v in trial_metadata.items()})
        self.write_json("/trial/metadata", trial_metadata)

    def _channel(self, topic: str, msgtype: str) -> int:
        if topic in self._channels:
            if self._topics[topic]["type"] != msgtype:
                raise TypeError(f"topic {topic} carries {self._topics[topic]['type']}, not {msgtype}")
            return self._channels[topic]
        if msgtype not in self._schemas:
            self._schemas[msgtype] = self._mcap.register_schema(msgtype, "ros2msg", _ros_msgdef(msgtype).encode())
        self._channels[topic] = self._mcap.register_channel(topic, "cdr", self._schemas[msgtype])
        self._topics[topic] = {"type": msgtype, "count": 0}
        self._write_metadata()
        return self._channels[topic]

    def write(self, topic: str, msg: Any, stamp_ns: int | None = None) -> None:
        """Append one message (log time = `stamp_ns` or now) and flush it to disk."""
        if self.closed:
            raise RuntimeError(f"trial bag {self.path} is closed")
        msgtype = msg.__msgtype__
        channel = self._channel(topic, msgtype)
        stamp = time.time_ns() if stamp_ns is None else int(stamp_ns)
        data = bytes(typestore().serialize_cdr(msg, msgtype))
        self._mcap.add_message(channel, log_time=stamp, data=data, publish_time=stamp)
        self._file.flush()
        self._topics[topic]["count"] += 1
        self._start_ns, self._end_ns = min(self._start_ns, stamp), max(self._end_ns, stamp)

    def write_json(self, topic: str, value: Any, stamp_ns: int | None = None) -> None:
        """A JSON document as std_msgs/String (metadata, events, the outcome)."""
        String = typestore().types["std_msgs/msg/String"]
        self.write(topic, String(data=json.dumps(value, default=json_default)), stamp_ns)

    def _write_metadata(self) -> None:
        tmp = self.path / "metadata.yaml.tmp"
        tmp.write_text(_metadata_yaml(self.file_name, self._topics, self._start_ns, self._end_ns))
        tmp.replace(self.path / "metadata.yaml")

    def close(self) -> None:
        """Write the mcap summary and the final metadata.yaml."""
        if self.closed:
            return
        self.closed = True
        self._mcap.finish()
        self._file.close()
        self._write_metadata()

    def __enter__(self) -> TrialBagWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class BagMessage:
    topic: str
    msgtype: str
    log_time_ns: int
    msg: Any
    """The deserialised rosbags dataclass."""


@dataclass
class TrialBag:
    """Everything in one trial bag, in log order."""

    path: Path
    messages: list[BagMessage] = field(default_factory=list)
    complete: bool = True
    """False when the bag ends mid-way (the run crashed or was killed while writing)."""

    def topic(self, name: str) -> list[BagMessage]:
        return [m for m in self.messages if m.topic == name]

    def json(self, name: str) -> list[Any]:
        return [json.loads(m.msg.data) for m in self.topic(name)]

    @property
    def metadata(self) -> dict[str, Any]:
        found = self.json("/trial/metadata")
        return found[0] if found else {}

    @property
    def outcome(self) -> dict[str, Any] | None:
        found = self.json("/trial/outcome")
        return found[-1] if found else None


def bag_file(bag_path: str | Path) -> Path:
    """The .mcap file of a bag directory (or the file itself)."""
    path = Path(bag_path)
    if path.is_file():
        return path
    files = sorted(path.glob("*.mcap"))
    if not files:
        raise FileNotFoundError(f"no .mcap file in {path}")
    return files[0]


def iter_bag(bag_path: str | Path) -> Iterator[tuple[Schema, Channel, Message] | None]:
    """(schema, channel, message) in file order; yields None once if the file ends mid-record."""
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    with open(bag_file(bag_path), "rb") as stream:
        try:
            for record in StreamReader(stream).records:
                if isinstance(record, Schema):
                    schemas[record.id] = record
                elif isinstance(record, Channel):
                    channels[record.id] = record
                elif isinstance(record, Message):
                    channel = channels[record.channel_id]
                    yield schemas[channel.schema_id], channel, record
        except (McapError, EOFError, ValueError, KeyError):
            yield None


def read_bag(bag_path: str | Path, topics: set[str] | None = None) -> TrialBag:
    """Read a trial bag, complete or cut short by a crash (messages up to the last whole record)."""
    store = typestore()
    bag = TrialBag(Path(bag_path))
    for item in iter_bag(bag_path):
        if item is None:
            bag.complete = False
            break
        schema, channel, message = item
        if topics is not None and channel.topic not in topics:
            continue
        msg = store.deserialize_cdr(message.data, schema.name)
        bag.messages.append(BagMessage(channel.topic, schema.name, message.log_time, msg))
    return bag
