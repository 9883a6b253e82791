# ruff: noqa
from a2a.compat.v0_3 import a2a_v0_3_pb2 as _a2a_v0_3_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListTasksRequest(_message.Message):
    __slots__ = (
        "context_id",
        "status",
        "page_size",
        "page_token",
        "history_length",
        "last_updated_after",
        "include_artifacts",
        "metadata",
    )
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HISTORY_LENGTH_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    context_id: str
    status: _a2a_v0_3_pb2.TaskState
    page_size: int
    page_token: str
    history_length: int
    last_updated_after: int
    include_artifacts: bool
    metadata: _struct_pb2.Struct
    def __init__(
        self,
        context_id: _Optional[str] = ...,
        status: _Optional[_Union[_a2a_v0_3_pb2.TaskState, str]] = ...,
        page_size: _Optional[int] = ...,
        page_token: _Optional[str] = ...,
        history_length: _Optional[int] = ...,
        last_updated_after: _Optional[int] = ...,
        include_artifacts: _Optional[bool] = ...,
        metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...,
    ) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_page_token", "page_size", "total_size")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[_a2a_v0_3_pb2.Task]
    next_page_token: str
    page_size: int
    total_size: int
    def __init__(
        self,
        tasks: _Optional[_Iterable[_Union[_a2a_v0_3_pb2.Task, _Mapping]]] = ...,
        next_page_token: _Optional[str] = ...,
        page_size: _Optional[int] = ...,
        total_size: _Optional[int] = ...,
    ) -> None: ...

class SetTaskPushNotificationRequest(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _a2a_v0_3_pb2.TaskPushNotificationConfig
    def __init__(
        self, config: _Optional[_Union[_a2a_v0_3_pb2.TaskPushNotificationConfig, _Mapping]] = ...
    ) -> None: ...

class AgentCardSupportedInterfaces(_message.Message):
    __slots__ = ("supported_interfaces",)
    SUPPORTED_INTERFACES_FIELD_NUMBER: _ClassVar[int]
    supported_interfaces: _containers.RepeatedCompositeFieldContainer[_a2a_v0_3_pb2.AgentInterface]
    def __init__(
        self,
        supported_interfaces: _Optional[
            _Iterable[_Union[_a2a_v0_3_pb2.AgentInterface, _Mapping]]
        ] = ...,
    ) -> None: ...
