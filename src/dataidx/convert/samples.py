"""The standard sample: what a converter returns and a reader serves, typed as LLaMA-Factory v1 types it.

v1's ``utils/types.py`` declares the same shapes (``Content``, ``Message``, ``SFTSample``,
``DPOSample``); here the preference sample is ``PairSample``, after the ``pair`` converter that
makes it. A TypedDict is a plain dict at run time, so these types cost nothing and check nothing:
they document the contract for type checkers and readers of the code. A converter may return any
dict (a user's often does); the build checks what matters of it (a dict, messages of standard
roles with content as blocks, its cuts) and the renderer refuses the rest, entry by entry.

Example::

    sample: SFTSample = {"messages": [
        {"role": "user", "content": [{"type": "text", "value": "Hi"}], "loss_weight": 0.0},
        {"role": "assistant", "content": [{"type": "text", "value": "Hello!"}], "loss_weight": 1.0},
    ]}
"""

from __future__ import annotations

from typing import TypedDict


class Content(TypedDict):
    """One block of a message: ``type`` is ``text``, ``reasoning``, ``tool_call`` (JSON text of
    ``{"name", "arguments"}``) or a media kind (``image_url``, ``video_url``, ``audio_url``)."""

    type: str
    value: str


class _MessageKeys(TypedDict):
    role: str  # one of expansion.ROLES: system, user, assistant, tool
    content: list[Content]


class Message(_MessageKeys, total=False):
    """One message; ``loss_weight`` 1.0 trains on it, 0.0 does not (v1 reads a missing one as 1.0)."""

    loss_weight: float


class _SFTKeys(TypedDict):
    messages: list[Message]


class SFTSample(_SFTKeys, total=False):
    """A conversation; ``tools`` is JSON text; ``extra_info`` is text v1 hands to the trainer
    beside the entry's model inputs (a KTO label, say). A reader adds ``_dataset_name``, and
    serves an entry's ``messages`` cut to its prefix."""

    tools: str
    extra_info: str
    _dataset_name: str


class _PairKeys(TypedDict):
    chosen_messages: list[Message]
    rejected_messages: list[Message]


class PairSample(_PairKeys, total=False):
    """A preference pair (v1's ``DPOSample``): both sides whole, each with its prompt."""

    tools: str
    extra_info: str
    _dataset_name: str


class TextSample(TypedDict):
    """A pretraining document (LLaMA-Factory's ``pt`` stage; v1 has no such type): its text
    trained whole, the tokenizer's EOS after it. A reader adds ``_dataset_name``."""

    text: str


#: What a converter returns and a reader serves.
Sample = SFTSample | PairSample | TextSample
