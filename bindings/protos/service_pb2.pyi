# ruff: noqa
from a2a.compat.v0_3 import a2a_v0_3_pb2 as _a2a_v0_3_pb2
from bindings.protos import messages_pb2 as _messages_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
