"""Board records -> one TensorBoard event file (the TFRecord format, with tensorboardX's protocol buffers).

Scalars are TensorBoard's classic `simple_value`, which every reader of
event files takes (TensorBoard's fast loader shows no other kind of scalar
tensor than a float32 one): TensorBoard holds them as 32-bit floats, the
capture holds the exact values. Texts go to the text plugin, images to the image
plugin, hyperparameters to the hparams plugin (a session start, and a session
end when the run ends). Writes are plain buffered appends flushed once per
batch: the events are the lesser record, never fsynced (a capture file is).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path
from typing import IO, Optional, Sequence

from harness.board.records import Hparams, Record, Scalar, SessionEnd, Text
from harness.fs.files import open_append, prepare_directory

FILE_PREFIX = "events.out.tfevents."


def missing_writer() -> Optional[str]:
    """Why no event file can be written here (tensorboardX missing), or None."""
    try:
        import tensorboardX  # noqa: F401
    except ImportError:
        return "tensorboardX is not installed (pip install tensorboardX, or reinstall the harness)"
    return None


class EventFile:
    """One event file in `directory`, opened on the first write."""

    _count = 0

    def __init__(self, directory: Path, root: Optional[Path] = None) -> None:
        self.directory = Path(directory)
        self.root = root  # the capture root the file must stay inside (harness.fs.files)
        self.path: Optional[Path] = None
        self._handle: Optional[IO[bytes]] = None
        self._described: set[str] = set()  # tags whose plugin metadata this file holds already
        self.bytes = 0

    def write(self, records: Sequence[Record]) -> None:
        """Append the records and flush (OSError when the disk refuses them)."""
        if not records:
            return
        handle = self._open()
        for record in records:
            data = self._event(record)
            handle.write(_framed(data))
            self.bytes += len(data) + 16
        handle.flush()

    def image(self, tag: str, png: bytes, wall_time: float, width: int, height: int, step: int = 0) -> None:
        """One PNG image under `tag` (the summary's figures)."""
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary

        image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=png)
        event = Event(wall_time=wall_time, step=step, summary=Summary(value=[Summary.Value(tag=tag, image=image)]))
        handle = self._open()
        data = event.SerializeToString()
        handle.write(_framed(data))
        self.bytes += len(data) + 16
        handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.close()

    def _open(self) -> IO[bytes]:
        if self._handle is None:
            from tensorboardX.proto.event_pb2 import Event

            prepare_directory(self.directory, self.root)
            EventFile._count += 1
            name = f"{FILE_PREFIX}{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{EventFile._count}"
            self.path = self.directory / name
            self._handle = os.fdopen(open_append(self.path, root=self.root), "ab")
            first = Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString()
            self._handle.write(_framed(first))
        return self._handle

    def _event(self, record: Record) -> bytes:
        from tensorboardX.proto.event_pb2 import Event

        if isinstance(record, Scalar):
            summary = self._scalar(record)
        elif isinstance(record, Text):
            summary = self._text(record)
        elif isinstance(record, Hparams):
            summary = _session_start(record)
        else:
            summary = _session_end(record)
        step = record.step if isinstance(record, (Scalar, Text)) else 0
        event = Event(wall_time=record.wall_time, step=step, summary=summary)
        data: bytes = event.SerializeToString()
        return data

    def _metadata(self, tag: str, plugin: str, content: bytes = b"") -> object:
        from tensorboardX.proto.summary_pb2 import SummaryMetadata

        if tag in self._described:
            return None
        self._described.add(tag)
        return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=plugin, content=content))

    def _scalar(self, record: Scalar) -> object:
        from tensorboardX.proto.summary_pb2 import Summary

        return Summary(value=[Summary.Value(tag=record.tag, simple_value=record.value)])

    def _text(self, record: Text) -> object:
        from tensorboardX.proto.plugin_text_pb2 import TextPluginData
        from tensorboardX.proto.summary_pb2 import Summary
        from tensorboardX.proto.tensor_pb2 import TensorProto
        from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto

        tensor = TensorProto(
            dtype="DT_STRING",
            string_val=[record.text.encode("utf-8")],
            tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]),
        )
        value = Summary.Value(tag=record.tag, tensor=tensor)
        metadata = self._metadata(record.tag, "text", TextPluginData(version=0).SerializeToString())
        if metadata is not None:
            value.metadata.CopyFrom(metadata)
        return Summary(value=[value])


_HPARAMS_PLUGIN = "hparams"
_SESSION_START_TAG = "_hparams_/session_start_info"
_SESSION_END_TAG = "_hparams_/session_end_info"
_STATUS = {"success": "STATUS_SUCCESS", "failure": "STATUS_FAILURE", "unknown": "STATUS_UNKNOWN"}


def _hparams_summary(tag: str, content: bytes) -> object:
    from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata

    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=_HPARAMS_PLUGIN, content=content))
    return Summary(value=[Summary.Value(tag=tag, metadata=metadata)])


def _session_start(record: Hparams) -> object:
    """The run's hyperparameters. No experiment summary: TensorBoard builds the table's columns from every run's
    session (one run's experiment summary would hide the flags only other runs have)."""
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData, SessionStartInfo

    start = SessionStartInfo(start_time_secs=record.wall_time)
    for key, value in record.values.items():
        if isinstance(value, bool):
            start.hparams[key].bool_value = value
        elif isinstance(value, str):
            start.hparams[key].string_value = value
        else:
            start.hparams[key].number_value = value
    content = HParamsPluginData(session_start_info=start, version=0).SerializeToString()
    return _hparams_summary(_SESSION_START_TAG, content)


def _session_end(record: SessionEnd) -> object:
    from tensorboardX.proto.api_pb2 import Status
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData, SessionEndInfo

    end = SessionEndInfo(
        status=Status.Value(_STATUS.get(record.state, "STATUS_UNKNOWN")), end_time_secs=record.wall_time
    )
    content = HParamsPluginData(session_end_info=end, version=0).SerializeToString()
    return _hparams_summary(_SESSION_END_TAG, content)


def _framed(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, the data, its masked CRC."""
    from tensorboardX.record_writer import masked_crc32c

    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))
