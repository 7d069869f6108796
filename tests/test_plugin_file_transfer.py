"""The plugin reads an uploaded file with a timeout that fits a large file (8 concurrent 1-3 MB
uploads on a real host exceed the SDK's 15 s default)."""

from __future__ import annotations

from typing import Any

from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction

from main import FILE_TRANSFER_TIMEOUT_S, LucidRagPlugin


class RecordingHandler:
    """The three runtime-handler calls the SDK's get_knowledge_file_stream makes, recorded."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls: list[tuple[str, Any]] = []
        self.files = {"tmp-key": data}

    async def call_action(self, action, data: dict[str, Any], timeout: float | None = 15.0, **_: Any):
        self.calls.append(("call_action", (action, data, timeout)))
        return {"file_key": "tmp-key"}

    async def read_local_file(self, file_key: str) -> bytes:
        return self.files[file_key]

    async def delete_local_file(self, file_key: str) -> None:
        del self.files[file_key]


async def test_the_upload_is_read_with_a_long_timeout_and_its_temporary_copy_removed():
    plugin = LucidRagPlugin()
    handler = RecordingHandler(b"x" * 3_000_000)
    plugin.plugin_runtime_handler = handler  # type: ignore[assignment]
    data = await plugin.get_knowledge_file_stream("v1/kb/file.pdf")
    assert data == handler.data and handler.files == {}
    action, payload, timeout = handler.calls[0][1]
    assert action == PluginToRuntimeAction.GET_KNOWLEDEGE_FILE_STREAM and payload == {"storage_path": "v1/kb/file.pdf"}
    assert timeout == FILE_TRANSFER_TIMEOUT_S and timeout >= 120
