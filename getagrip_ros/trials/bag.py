"""Trial bags: one ROS 2 bag (mcap storage) per trial, written as it happens.

Messages are rosbags dataclasses (``typestore.types[...]``; see `trials.messages`), serialised to CDR with the ROS 2
Jazzy typestore plus this stack's own message types. The .mcap file is chunked and indexed (ros2 profile, schemas in
ros2msg, a summary with statistics and chunk indexes), the layout rosbag2's mcap storage writes, so rosbag2 readers
take it (tested: `rosbags.highlevel.AnyReader`, `rosbags.rosbag2.Reader`, the `mcap` library's indexed reader):

* log time (mcap ``log_time``, the rosbag2 receive time) is the record time: the wall clock when the writer got the
  message, never decreasing through the bag; the robot's own stamp stays in the message header and is the mcap
  ``publish_time`` (`BagMessage.stamp_ns`; robot stamps may jump back, log times never do).
* a chunk is written at most `FLUSH_INTERVAL_S` of record time after its first message (checked on every write and by
  a background thread, so an idle writer flushes too), or when it reaches `CHUNK_BYTES`. Each write rewrites the
  summary (schemas, channels, statistics, chunk and metadata indexes) and the footer after the new chunk, and then
  ``metadata.yaml``: after every flush the bag is a complete, indexed rosbag2 bag. A process killed (SIGKILL) loses at
  most the messages of the last `FLUSH_INTERVAL_S`; the bag stays readable as it is, except when the kill lands in the
  middle of the one write of a chunk, which `recover_bag` (``getagrip trials recover BAG``) repairs.
* `TrialBag.complete` tells a bag its writer closed (a metadata record written at `TrialBagWriter.close`) from one
  whose run died; `read_bag` reads both, and also a file cut anywhere (messages up to the last whole chunk).
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
import weakref
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from mcap.data_stream import RecordBuilder
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.records import (Channel, Chunk, ChunkIndex, DataEnd, Footer, Header, McapRecord, Message, MessageIndex,
                          Metadata, MetadataIndex, Schema, Statistics, SummaryOffset)
from mcap.stream_reader import StreamReader

from getagrip_ros.serialization import json_default

BAG_FORMAT_VERSION = 9  # rosbag2 metadata version (Jazzy)
METADATA_NAME = "getagrip_trial"
"""Name of the mcap metadata record holding the trial's metadata (also on the /trial/metadata topic)."""
CLOSED_NAME = "getagrip_bag_closed"
"""Metadata record written by `TrialBagWriter.close`: the writer finished the bag (`TrialBag.complete`)."""
RECOVERED_NAME = "getagrip_bag_recovered"
"""Metadata record written by `recover_bag` into a bag it rebuilt after a crash."""
LIBRARY = "getagrip_ros trial bag 2 (chunked, indexed)"
"""The mcap header's library of the bags written here; older bags (one unindexed stream) have another."""
OWN_MESSAGES = ("Grasp", "ObjectState", "Status", "StageTiming")
FLUSH_INTERVAL_S = 0.5
"""A chunk goes to disk at most this long (record time) after its first message: what a crash can lose."""
CHUNK_BYTES = 4 * 1024 * 1024
"""... or as soon as it holds this many bytes."""
MCAP_MAGIC = b"\x89MCAP0\r\n"


class NotABagError(ValueError):
    """The path exists but holds no trial bag (the message is one line and names the file)."""


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
    """rosbag2's metadata.yaml: the topics with their message counts, start time and duration (of the log times)."""
    import yaml

    total = sum(t["count"] for t in topics.values())
    duration = max(end_ns - start_ns, 0) if total else 0
    info = {
        "version": BAG_FORMAT_VERSION, "storage_identifier": "mcap", "relative_file_paths": [bag_file],
        "duration": {"nanoseconds": duration}, "starting_time": {"nanoseconds_since_epoch": start_ns if total else 0},
        "message_count": total,
        "topics_with_message_count": [
            {"topic_metadata": {"name": name, "type": t["type"], "serialization_format": "cdr",
                                "offered_qos_profiles": [], "type_description_hash": ""},
             "message_count": t["count"]} for name, t in topics.items()],
        "compression_format": "", "compression_mode": "",
        "files": [{"path": bag_file, "starting_time": {"nanoseconds_since_epoch": start_ns if total else 0},
                   "duration": {"nanoseconds": duration}, "message_count": total}],
        "custom_data": {}, "ros_distro": "jazzy",
    }
    return yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False)


def _write_metadata_yaml(bag_dir: Path, mcap_name: str, mcap: IndexedMcapFile) -> None:
    """Replace bag_dir/metadata.yaml (atomically) by one describing what `mcap` has on disk."""
    start, end = mcap.time_range()
    tmp = bag_dir / "metadata.yaml.tmp"
    tmp.write_text(_metadata_yaml(mcap_name, mcap.topics(), start, end))
    tmp.replace(bag_dir / "metadata.yaml")


def _record_bytes(*records: McapRecord) -> bytes:
    builder = RecordBuilder()
    for record in records:
        record.write(builder)
    return builder.end()


class IndexedMcapFile:
    """A chunked, indexed MCAP file (ros2 profile, uncompressed chunks with CRCs) that is complete after every `commit`.

    Schemas, channels and messages go into the open chunk; `commit` writes that chunk, its message indexes and any
    pending metadata records at the end of the data section and, after them, the data end record, the whole summary
    and the footer, in one write that replaces the previous summary. Not thread-safe (`TrialBagWriter` locks).
    """

    def __init__(self, fd: int, library: str = LIBRARY) -> None:
        self._fd = fd
        self._header = MCAP_MAGIC + _record_bytes(Header(profile="ros2", library=library))
        self._data_end = 0  # where the next chunk goes (0: nothing written yet)
        self.schemas: dict[int, Schema] = {}
        self.channels: dict[int, Channel] = {}
        self._schema_of_channel: dict[int, str] = {}
        self._chunk_indexes: list[ChunkIndex] = []
        self._metadata_indexes: list[MetadataIndex] = []
        self.counts: dict[int, int] = {}
        """Messages on disk per channel id."""
        self._start_ns: int | None = None
        self._end_ns = 0
        self._chunk = RecordBuilder()
        self._chunk_index: dict[int, list[tuple[int, int]]] = {}
        self._chunk_counts: dict[int, int] = {}
        self._chunk_start_ns = self._chunk_end_ns = 0
        self._pending_metadata: list[Metadata] = []
        self.closed = False

    @property
    def pending_messages(self) -> int:
        return sum(self._chunk_counts.values())

    @property
    def pending_bytes(self) -> int:
        return self._chunk.count

    def add_schema(self, name: str, encoding: str, data: bytes) -> int:
        schema = Schema(id=len(self.schemas) + 1, name=name, encoding=encoding, data=data)
        self.schemas[schema.id] = schema
        schema.write(self._chunk)
        return schema.id

    def add_channel(self, topic: str, message_encoding: str, schema_id: int, metadata: dict[str, str] | None = None) -> int:
        channel = Channel(id=len(self.channels) + 1, topic=topic, message_encoding=message_encoding,
                          schema_id=schema_id, metadata=dict(metadata or {}))
        self.channels[channel.id] = channel
        self.counts[channel.id] = 0
        channel.write(self._chunk)
        return channel.id

    def add_message(self, channel_id: int, log_time: int, publish_time: int, data: bytes, sequence: int = 0) -> None:
        if not self.pending_messages:
            self._chunk_start_ns = self._chunk_end_ns = log_time
        self._chunk_start_ns, self._chunk_end_ns = min(self._chunk_start_ns, log_time), max(self._chunk_end_ns, log_time)
        self._chunk_index.setdefault(channel_id, []).append((log_time, self._chunk.count))
        self._chunk_counts[channel_id] = self._chunk_counts.get(channel_id, 0) + 1
        Message(channel_id=channel_id, log_time=log_time, publish_time=publish_time, data=data,
                sequence=sequence % 2**32).write(self._chunk)

    def add_metadata(self, name: str, data: dict[str, str]) -> None:
        """A metadata record, written (and indexed) with the next commit."""
        self._pending_metadata.append(Metadata(name=name, metadata=dict(data)))

    def topics(self) -> dict[str, dict]:
        """{topic: {"type", "count"}} of what is on disk."""
        return {c.topic: {"type": self.schemas[c.schema_id].name if c.schema_id in self.schemas else "",
                          "count": self.counts.get(c.id, 0)} for c in self.channels.values()}

    def time_range(self) -> tuple[int, int]:
        """(first, last) log time on disk (0, 0 when no message is)."""
        return (self._start_ns or 0, self._end_ns) if self._start_ns is not None else (0, 0)

    def commit(self) -> bool:
        """Write the open chunk and pending metadata, then a new summary and footer; False when nothing was pending."""
        if self.closed:
            raise RuntimeError("the mcap file is closed")
        if self._data_end and not self._chunk.count and not self._pending_metadata:
            return False
        head = b"" if self._data_end else self._header
        offset = self._data_end or len(head)
        parts = [head]
        if self._chunk.count:
            data = self._chunk.end()
            chunk = _record_bytes(Chunk(compression="", data=data, message_start_time=self._chunk_start_ns,
                                        message_end_time=self._chunk_end_ns, uncompressed_crc=zlib.crc32(data),
                                        uncompressed_size=len(data)))
            index_start = offset + len(chunk)
            index_offsets, indexes = {}, []
            for channel_id, entries in self._chunk_index.items():
                index_offsets[channel_id] = index_start + sum(len(b) for b in indexes)
                indexes.append(_record_bytes(MessageIndex(channel_id=channel_id, records=entries)))
            self._chunk_indexes.append(ChunkIndex(
                message_start_time=self._chunk_start_ns, message_end_time=self._chunk_end_ns, chunk_start_offset=offset,
                chunk_length=len(chunk), message_index_offsets=index_offsets,
                message_index_length=sum(len(b) for b in indexes), compression="", compressed_size=len(data),
                uncompressed_size=len(data)))
            parts += [chunk, *indexes]
            offset = index_start + sum(len(b) for b in indexes)
            for channel_id, count in self._chunk_counts.items():
                self.counts[channel_id] = self.counts.get(channel_id, 0) + count
            if self._chunk_counts:
                self._start_ns = self._chunk_start_ns if self._start_ns is None else min(self._start_ns, self._chunk_start_ns)
                self._end_ns = max(self._end_ns, self._chunk_end_ns)
            self._chunk_index, self._chunk_counts = {}, {}
        for record in self._pending_metadata:
            data = _record_bytes(record)
            self._metadata_indexes.append(MetadataIndex(offset=offset, length=len(data), name=record.name))
            parts.append(data)
            offset += len(data)
        self._pending_metadata = []
        data_end = offset
        tail = self._summary_and_footer(data_end)
        self._pwrite(b"".join(parts) + tail, self._data_end)
        os.ftruncate(self._fd, data_end + len(tail))
        self._data_end = data_end
        return True

    def _summary_and_footer(self, data_end: int) -> bytes:
        data_end_record = _record_bytes(DataEnd(data_section_crc=0))
        summary_start = data_end + len(data_end_record)
        start, end = self.time_range()
        groups = [
            (Opcode.SCHEMA, list(self.schemas.values())),
            (Opcode.CHANNEL, list(self.channels.values())),
            (Opcode.STATISTICS, [Statistics(
                message_count=sum(self.counts.values()), schema_count=len(self.schemas),
                channel_count=len(self.channels), attachment_count=0, metadata_count=len(self._metadata_indexes),
                chunk_count=len(self._chunk_indexes), message_start_time=start, message_end_time=end,
                channel_message_counts=dict(self.counts))]),
            (Opcode.CHUNK_INDEX, self._chunk_indexes),
            (Opcode.METADATA_INDEX, self._metadata_indexes),
        ]
        summary, offsets = b"", []
        for opcode, records in groups:
            if records:
                group = _record_bytes(*records)
                offsets.append(SummaryOffset(group_opcode=opcode, group_start=summary_start + len(summary),
                                             group_length=len(group)))
                summary += group
        summary_offset_start = summary_start + len(summary)
        summary += _record_bytes(*offsets)
        crc = zlib.crc32(struct.pack("<BQQQ", Opcode.FOOTER, 20, summary_start, summary_offset_start), zlib.crc32(summary))
        footer = _record_bytes(Footer(summary_start=summary_start, summary_offset_start=summary_offset_start,
                                      summary_crc=crc))
        return data_end_record + summary + footer + MCAP_MAGIC

    def _pwrite(self, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view, offset = view[written:], offset + written

    def close(self) -> None:
        if not self.closed:
            self.commit()
            self.closed = True
            os.close(self._fd)


class _Flusher:
    """One daemon thread for every open writer of the process: commits chunks that have waited FLUSH_INTERVAL_S."""

    def __init__(self) -> None:
        self._writers: weakref.WeakSet[TrialBagWriter] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, writer: TrialBagWriter) -> None:
        with self._lock:
            self._writers.add(writer)
            if self._thread is None or not self._thread.is_alive():  # (also after a fork)
                self._thread = threading.Thread(target=self._run, name="trial-bag-flusher", daemon=True)
                self._thread.start()

    def discard(self, writer: TrialBagWriter) -> None:
        with self._lock:
            self._writers.discard(writer)

    def _run(self) -> None:
        while True:
            time.sleep(FLUSH_INTERVAL_S / 5)
            with self._lock:
                writers = list(self._writers)
                if not writers:  # no bag open: the thread ends (`add` starts another)
                    self._thread = None
                    return
            for writer in writers:
                writer._flush_if_due()
            del writers


_FLUSHER = _Flusher()
_OPEN_WRITERS: weakref.WeakValueDictionary[str, TrialBagWriter] = weakref.WeakValueDictionary()


class TrialBagWriter:
    """Writes one trial bag: a directory with ``<name>_0.mcap`` and ``metadata.yaml`` (see the module's docstring).

    ``write(topic, msg, stamp_ns)`` takes a rosbags message dataclass; the topic's type is fixed by its first message.
    Thread-safe. Use as a context manager; `close` may be called more than once. `read_bag` of a bag that a writer of
    this process still has open flushes it first, so it sees every message written so far.
    """

    def __init__(self, bag_dir: str | Path, trial_metadata: dict[str, Any]) -> None:
        self.path = Path(bag_dir)
        if self.path.exists():
            raise FileExistsError(f"trial bag {self.path} exists already (one bag per trial)")
        self.path.mkdir(parents=True)
        self.file_name = f"{self.path.name}_0.mcap"
        partial = self.path / f"{self.file_name}.partial"  # named .mcap once it holds a whole first commit
        self._mcap = IndexedMcapFile(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        self._lock = threading.RLock()
        self._channels: dict[str, int] = {}
        self._types: dict[str, str] = {}
        self._schemas: dict[str, int] = {}
        self._sequence: dict[str, int] = {}
        self._last_record_ns = 0
        self._chunk_start_ns = 0
        self._chunk_started_s = 0.0
        self._error: BaseException | None = None
        self.closed = False
        self._mcap.add_metadata(METADATA_NAME, {k: json.dumps(v, default=json_default) for k, v in trial_metadata.items()})
        self.write_json("/trial/metadata", trial_metadata)
        self._mcap.commit()
        partial.rename(self.path / self.file_name)
        self._write_metadata()
        self._key = str(self.path.resolve())
        _OPEN_WRITERS[self._key] = self
        _FLUSHER.add(self)

    def _channel(self, topic: str, msgtype: str) -> int:
        if topic in self._channels:
            if self._types[topic] != msgtype:
                raise TypeError(f"topic {topic} carries {self._types[topic]}, not {msgtype}")
            return self._channels[topic]
        if msgtype not in self._schemas:
            self._schemas[msgtype] = self._mcap.add_schema(msgtype, "ros2msg", _ros_msgdef(msgtype).encode())
        self._channels[topic] = self._mcap.add_channel(topic, "cdr", self._schemas[msgtype])
        self._types[topic] = msgtype
        self._sequence[topic] = 0
        return self._channels[topic]

    def write(self, topic: str, msg: Any, stamp_ns: int | None = None) -> None:
        """Append one message: log time = now (record time, never decreasing), publish time = `stamp_ns` (the
        robot's stamp; default now). On disk within FLUSH_INTERVAL_S."""
        msgtype = msg.__msgtype__
        data = bytes(typestore().serialize_cdr(msg, msgtype))
        with self._lock:
            if self.closed:
                raise RuntimeError(f"trial bag {self.path} is closed")
            self._raise_flush_error()
            record_ns = max(time.time_ns(), self._last_record_ns)
            if self._mcap.pending_messages and record_ns - self._chunk_start_ns >= FLUSH_INTERVAL_S * 1e9:
                self._commit()
            channel = self._channel(topic, msgtype)
            self._sequence[topic] += 1
            if not self._mcap.pending_messages:
                self._chunk_start_ns, self._chunk_started_s = record_ns, time.monotonic()
            self._mcap.add_message(channel, record_ns, record_ns if stamp_ns is None else int(stamp_ns), data,
                                   self._sequence[topic])
            self._last_record_ns = record_ns
            if self._mcap.pending_bytes >= CHUNK_BYTES:
                self._commit()

    @property
    def last_record_ns(self) -> int:
        """The record time (log time) of the last message written (0 before any)."""
        return self._last_record_ns

    def write_json(self, topic: str, value: Any, stamp_ns: int | None = None) -> None:
        """A JSON document as std_msgs/String (metadata, events, the outcome)."""
        String = typestore().types["std_msgs/msg/String"]
        self.write(topic, String(data=json.dumps(value, default=json_default)), stamp_ns)

    def flush(self) -> None:
        """Put everything written so far on disk now (a complete, indexed bag and its metadata.yaml)."""
        with self._lock:
            if not self.closed:
                self._raise_flush_error()
                self._commit()

    def _commit(self) -> None:
        if self._mcap.commit():
            self._write_metadata()

    def _flush_if_due(self) -> None:
        """From the flusher thread: commit the open chunk once it has waited FLUSH_INTERVAL_S."""
        with self._lock:
            if self.closed or self._error is not None or not self._mcap.pending_messages:
                return
            if time.monotonic() - self._chunk_started_s >= FLUSH_INTERVAL_S:
                try:
                    self._commit()
                except Exception as err:  # noqa: BLE001 - raised to the writer's caller on its next call
                    self._error = err

    def _raise_flush_error(self) -> None:
        if self._error is not None:
            raise OSError(f"trial bag {self.path}: writing a chunk failed: {self._error}") from self._error

    def _write_metadata(self) -> None:
        _write_metadata_yaml(self.path, self.file_name, self._mcap)

    def close(self) -> None:
        """Write the last chunk, the closed marker, the summary and the final metadata.yaml."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            _FLUSHER.discard(self)
            if _OPEN_WRITERS.get(self._key) is self:
                del _OPEN_WRITERS[self._key]
            self._mcap.add_metadata(CLOSED_NAME, {"message_count": str(sum(self._mcap.counts.values()) +
                                                                       self._mcap.pending_messages)})
            self._mcap.close()
            self._write_metadata()

    def __enter__(self) -> TrialBagWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _flush_open_writer(bag_path: str | Path) -> None:
    """If this process is writing the bag, put what it wrote so far on disk."""
    path = Path(bag_path)
    writer = _OPEN_WRITERS.get(str((path.parent if path.suffix == ".mcap" else path).resolve()))
    if writer is not None:
        writer.flush()


@dataclass
class BagMessage:
    topic: str
    msgtype: str
    stamp_ns: int
    """The time the writer was given: the robot's stamp (mcap publish time; in the header too, for stamped types)."""
    msg: Any
    """The deserialised rosbags dataclass."""
    record_time_ns: int = 0
    """When it was recorded (mcap log time; never decreasing through a bag written here)."""

    @property
    def log_time_ns(self) -> int:
        """The stamp the message was written with (`stamp_ns`): the name the scorer and older code use."""
        return self.stamp_ns


@dataclass
class TrialBag:
    """Everything in one trial bag, in record order."""

    path: Path
    messages: list[BagMessage] = field(default_factory=list)
    complete: bool = True
    """False when the writer did not close the bag (the run crashed or was killed, or it is still being written)."""
    recovered: bool = False
    """True when `recover_bag` rebuilt the bag after a crash."""

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

    def stage_window(self, stage: str) -> tuple[int, int] | None:
        """(start, end) ns of the last run of a task stage (`/trial/events`; end = the largest int64 while it never
        ended), None when it never started. The robot stamps its states in the same clock, so the states of a stage
        are those stamped within its window (capture's and execution's: the trial's trace)."""
        events = self.json("/trial/events")
        starts = [e["time_ns"] for e in events if e.get("event") == "stage_start" and e.get("stage") == stage]
        if not starts:
            return None
        ends = [e["time_ns"] for e in events if e.get("event") == "stage_end" and e.get("stage") == stage
                and e["time_ns"] >= starts[-1]]
        return starts[-1], ends[-1] if ends else 2**63 - 1

    def stage_messages(self, topic: str, stage: str) -> list[BagMessage]:
        """The messages of `topic` stamped within the stage's window, in stamp order (none when it never started)."""
        window = self.stage_window(stage)
        if window is None:
            return []
        return sorted((m for m in self.topic(topic) if window[0] <= m.stamp_ns <= window[1]), key=lambda m: m.stamp_ns)


def bag_file(bag_path: str | Path) -> Path:
    """The .mcap file of a bag directory (or the file itself)."""
    path = Path(bag_path)
    if path.is_file():
        return path
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    if not path.is_dir():
        raise NotABagError(f"{path} is not a trial bag (neither a folder nor a regular file)")
    files = sorted(path.glob("*.mcap"))
    if not files:
        partial = sorted(path.glob("*.mcap.partial"))
        died = f" (only {partial[0].name}: its writer died while creating it)" if partial else ""
        raise FileNotFoundError(f"{path} is not a trial bag: no .mcap file in it{died}")
    return files[0]


def check_bag(bag_path: str | Path) -> tuple[Path, str]:
    """(the bag's .mcap file, its header's library); NotABagError when the file does not start as a ROS 2 mcap bag."""
    path = bag_file(bag_path)
    try:
        with open(path, "rb") as f:
            head = f.read(8 + 9 + 4096)
    except OSError as err:
        raise NotABagError(f"{path} cannot be read as a trial bag: {err.strerror or err}") from err
    if not head:
        raise NotABagError(f"{path} is not a trial bag: the file is empty")
    if head[:8] != MCAP_MAGIC:
        raise NotABagError(f"{path} is not a trial bag: not an MCAP file (it does not start with the MCAP magic bytes)")
    try:
        opcode, length = struct.unpack_from("<BQ", head, 8)
        profile_length = struct.unpack_from("<I", head, 17)[0]
        profile = head[21:21 + profile_length].decode()
        library_length = struct.unpack_from("<I", head, 21 + profile_length)[0]
        library = head[25 + profile_length:25 + profile_length + library_length].decode()
    except (struct.error, UnicodeDecodeError):
        raise NotABagError(f"{path} is not a trial bag: its MCAP header is cut off or malformed") from None
    if opcode != Opcode.HEADER or length != 8 + profile_length + library_length:
        raise NotABagError(f"{path} is not a trial bag: its MCAP header is cut off or malformed")
    if profile != "ros2":
        raise NotABagError(f"{path} is not a trial bag: an MCAP file of profile {profile!r}, not a ROS 2 (ros2) bag")
    return path, library


class _Scan:
    """The records of a bag's data section in file order (Schema, Channel, Message, Metadata), read linearly with
    chunk CRCs checked, stopping at the first record that does not read whole (a file cut short by a crash)."""

    def __init__(self, bag_path: str | Path) -> None:
        self.file, self.library = check_bag(bag_path)
        self.closed = self.recovered = self.cut_short = False
        self.error = ""

    @property
    def complete(self) -> bool:
        if self.library == LIBRARY:
            return self.closed and not self.cut_short
        return not self.cut_short  # an older bag: complete when it ends with its footer

    def __iter__(self) -> Iterator[McapRecord]:
        in_summary = False
        with open(self.file, "rb") as stream:
            try:
                for record in StreamReader(stream, validate_crcs=True).records:
                    if isinstance(record, DataEnd):
                        in_summary = True  # the summary repeats schemas and channels: skip them
                    elif in_summary:
                        continue
                    elif isinstance(record, Metadata):
                        self.closed |= record.name == CLOSED_NAME
                        self.recovered |= record.name == RECOVERED_NAME
                        yield record
                    elif isinstance(record, (Schema, Channel, Message)):
                        yield record
            except (McapError, EOFError, ValueError, KeyError, struct.error, UnicodeDecodeError, MemoryError) as err:
                self.cut_short = True
                self.error = f"{type(err).__name__}: {err}".splitlines()[0][:200]


def _messages(scan: _Scan) -> Iterator[tuple[Schema, Channel, Message]]:
    """(schema, channel, message) of a scan in file order; a message before its channel ends it (cut short)."""
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    for record in scan:
        if isinstance(record, Schema):
            schemas[record.id] = record
        elif isinstance(record, Channel):
            channels[record.id] = record
        elif isinstance(record, Message):
            channel = channels.get(record.channel_id)
            if channel is None or channel.schema_id not in schemas:
                scan.cut_short = True  # not a bag written by a rosbag2 writer
                return
            yield schemas[channel.schema_id], channel, record


def iter_bag(bag_path: str | Path) -> Iterator[tuple[Schema, Channel, Message] | None]:
    """(schema, channel, message) in file order; yields None once if the file ends mid-record."""
    scan = _Scan(bag_path)
    yield from _messages(scan)
    if scan.cut_short:
        yield None


def read_bag(bag_path: str | Path, topics: set[str] | None = None) -> TrialBag:
    """Read a trial bag, complete or cut short by a crash (messages up to the last whole chunk).

    Raises FileNotFoundError for a missing path or a folder without an .mcap file and NotABagError for a file that
    is not a ROS 2 mcap bag (both with a one-line message naming the file)."""
    _flush_open_writer(bag_path)
    store = typestore()
    bag = TrialBag(Path(bag_path))
    scan = _Scan(bag_path)
    for schema, channel, record in _messages(scan):
        if topics is None or channel.topic in topics:
            bag.messages.append(BagMessage(channel.topic, schema.name, record.publish_time,
                                           store.deserialize_cdr(record.data, schema.name), record.log_time))
    bag.complete, bag.recovered = scan.complete, scan.recovered
    return bag


@dataclass
class Recovery:
    """What `recover_bag` did."""

    path: Path
    rewritten: bool
    """False: the bag was closed by its writer (or recovered already); nothing was changed."""
    messages: int
    topics: dict[str, int]
    """Messages kept per topic."""
    record_span_s: float
    """Record time from the first to the last message kept."""
    cut_short: str = ""
    """What ended the readable part of the old file ("" when it ended cleanly, without a closed marker)."""


def recover_bag(bag_path: str | Path) -> Recovery:
    """Rewrite a bag left by a crash (cut anywhere, or only never closed) as a complete, indexed bag holding every
    whole chunk of the old file, with a metadata.yaml that matches it. Bags written by older versions of this stack
    (one unindexed stream) are converted the same way. A bag its writer closed (or one recovered already) is left as
    it is. Do not run it on a bag that is still being written. Raises NotABagError / FileNotFoundError like read_bag."""
    scan = _Scan(bag_path)
    file = scan.file
    for _ in scan:  # a first pass finds how the file ends
        pass
    if scan.library == LIBRARY and not scan.cut_short and (scan.closed or scan.recovered):
        counts = _count_topics(file)  # closed by its writer, or recovered already: nothing to do
        return Recovery(file, False, sum(counts.values()), counts, 0.0)
    complete, error = scan.complete, scan.error
    scan = _Scan(file)
    tmp = file.with_name(file.name + ".recovering")
    tmp.unlink(missing_ok=True)
    out = IndexedMcapFile(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    schema_ids: dict[int, int] = {}
    channel_ids: dict[int, int] = {}
    chunk_start = None
    try:
        for record in scan:
            if isinstance(record, Schema):
                schema_ids[record.id] = out.add_schema(record.name, record.encoding, record.data)
            elif isinstance(record, Channel):
                channel_ids[record.id] = out.add_channel(record.topic, record.message_encoding,
                                                         schema_ids.get(record.schema_id, 0), record.metadata)
            elif isinstance(record, Metadata):
                if record.name != CLOSED_NAME:
                    out.add_metadata(record.name, record.metadata)
            elif isinstance(record, Message) and record.channel_id in channel_ids:
                if out.pending_messages and (out.pending_bytes >= CHUNK_BYTES or
                                             record.log_time - chunk_start >= FLUSH_INTERVAL_S * 1e9):
                    out.commit()
                if not out.pending_messages:
                    chunk_start = record.log_time
                out.add_message(channel_ids[record.channel_id], record.log_time, record.publish_time, record.data,
                                record.sequence)
        if complete:  # an older bag that had ended cleanly: still a finished trial
            out.add_metadata(CLOSED_NAME, {"message_count": str(sum(out.counts.values()) + out.pending_messages)})
        else:
            out.add_metadata(RECOVERED_NAME, {"recovered_at_ns": str(time.time_ns()), "cut_short": error,
                                              "from_library": scan.library})
        out.close()
        os.replace(tmp, file)
    except BaseException:
        if not out.closed:
            out.close()
        tmp.unlink(missing_ok=True)
        raise
    bag_dir = file.parent
    if Path(bag_path).is_dir() or (bag_dir / "metadata.yaml").exists():
        _write_metadata_yaml(bag_dir, file.name, out)
    start, end = out.time_range()
    return Recovery(file, True, sum(out.counts.values()), {t: v["count"] for t, v in out.topics().items()},
                    (end - start) * 1e-9, error)


def _count_topics(file: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in iter_bag(file):
        if item is not None:
            counts[item[1].topic] = counts.get(item[1].topic, 0) + 1
    return counts
