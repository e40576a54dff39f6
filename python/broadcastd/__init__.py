"""broadcastd's client library: sample handlers, controllers and setup UIs for the broadcastd protocol (version 2,
revision 2.10; docs/protocol.md), and the conformance check of a handler (`broadcastd-check-handler`). Standard library
only, Python 3.9 or later. `description()` is the protocol as data (protocol.json)."""

import json
from importlib import resources

from .controller import Client, Controller, NotRunning, Setup, Unsupported, socket_path
from .encoded import EncodedFollower, EncodedPacket, PacketRing
from .handler import SampleHandler, run, serve
from .wire import (
    OPCODE_NAMES,
    OPCODES,
    PROTOCOL_VERSION,
    AudioHeader,
    Connection,
    ConnectionClosed,
    DaemonError,
    FramePool,
    Message,
    Plane,
    ProtocolError,
    VideoHeader,
    encode,
    encode_json,
    release_slot_payload,
)

#: The protocol revision this package speaks.
REVISION = "2.10"

__all__ = [
    "Client",
    "Controller",
    "Setup",
    "NotRunning",
    "Unsupported",
    "socket_path",
    "SampleHandler",
    "run",
    "serve",
    "OPCODES",
    "OPCODE_NAMES",
    "PROTOCOL_VERSION",
    "REVISION",
    "AudioHeader",
    "Connection",
    "ConnectionClosed",
    "DaemonError",
    "FramePool",
    "Message",
    "Plane",
    "ProtocolError",
    "VideoHeader",
    "EncodedFollower",
    "EncodedPacket",
    "PacketRing",
    "encode",
    "encode_json",
    "release_slot_payload",
    "description",
]


def description() -> dict:
    """docs/protocol.json: every message, object, layout, limit, feature, error code and golden example."""
    return json.loads(resources.files(__package__).joinpath("protocol.json").read_text(encoding="utf-8"))
