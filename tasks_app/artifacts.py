"""How a stored artifact grows as an agent streams it: chunks appended to an artifact are kept
as the artifact reads, not as they arrived.

A model streams its answer a few characters at a time; kept chunk by chunk, a stored artifact
would hold one text part per token, which the console shows one word per line and which a
client reading `parts[0]` of the stored task sees as the first token only. So a text chunk that
follows a text part of the same kind is joined onto it. The stream itself (the task's event log,
SSE, push) still carries every chunk as it was sent.
"""

from __future__ import annotations

from collections.abc import Iterable

from a2a.types import Artifact, Part


def _joinable(last: Part, part: Part) -> bool:
    """Two parts that read as one text: both text, of the same media type and file name, and
    the same metadata (a part with metadata of its own says something about itself)."""
    return (
        last.WhichOneof("content") == "text"
        and part.WhichOneof("content") == "text"
        and last.media_type == part.media_type
        and last.filename == part.filename
        and last.metadata == part.metadata
    )


def artifact_parts_append(artifact: Artifact, parts: Iterable[Part]) -> None:
    """Append a chunk's `parts` to `artifact`, joining each text part onto the text part
    before it where the two read as one text; other parts are added as they are."""
    for part in parts:
        if artifact.parts and _joinable(artifact.parts[-1], part):
            artifact.parts[-1].text += part.text
        else:
            artifact.parts.append(part)


def artifact_joined(artifact: Artifact) -> Artifact:
    """A copy of `artifact` whose consecutive text parts are joined as appending them would
    have: what a stored, streamed artifact holds for the same content."""
    joined = Artifact()
    joined.CopyFrom(artifact)
    del joined.parts[:]
    artifact_parts_append(joined, artifact.parts)
    return joined
