"""Columns that decide what a row trains and that the dataset's converter would not read.

A preference pair's ``chosen``/``rejected`` and a KTO ``label`` change what a row teaches. A
converter that does not read them trains the row as if they were not there, and the build went
through: LLaMA-Factory's ``dpo_en_demo.json`` under ``sharegpt`` trained its prompts' turns and
neither answer, ``kto_en_demo.json`` under ``openai`` trained its 150 answers labelled false as
targets. The build refuses such a dataset from its column names, once, before a row is
converted, naming the converter that takes the rows (``pair``, ``kto``), or saying that none
does yet; a dataset that means it says ``ignore_columns``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SourceError
from ..spec import DatasetSpec

#: Columns that carry meaning, and what they carry.
MEANINGFUL = {"chosen": "a preference pair", "rejected": "a preference pair", "label": "a KTO label"}
#: The meaningful columns each built-in converter reads. A converter not named here (a user's)
#: is not checked: it reads what it was written to read.
READS: dict[str, tuple[str, ...]] = {"alpaca": (), "sharegpt": (), "openai": (), "none": (),
                                     "pair": ("chosen", "rejected"), "kto": ("label",)}
#: A prompt column beside ``chosen``/``rejected``: single answers, LLaMA-Factory v0's ranking shape.
_V0_PROMPTS = ("conversations", "instruction")


def unread_columns(converter: str, columns: Sequence[str], ignored: Sequence[str] = ()) -> list[str]:
    """The meaningful columns of ``columns`` that built-in ``converter`` would not read, less those
    ``ignored`` on purpose.

    Example::

        >>> unread_columns("sharegpt", ["conversations", "chosen", "rejected"])
        ['chosen', 'rejected']
    """
    if converter not in READS:
        return []
    return [column for column in MEANINGFUL
            if column in columns and column not in READS[converter] and column not in ignored]


def refuse_unread(dataset: DatasetSpec, *, converter: str, columns: Sequence[str]) -> None:
    """A SourceError naming the meaningful columns ``converter`` would ignore in ``dataset`` (its
    ``columns`` as the converter sees them) and what takes them, unless the dataset ignores them
    on purpose (``ignore_columns``)."""
    unread = unread_columns(converter, columns, dataset.ignore_columns or ())
    if not unread:
        return
    carried = sorted({MEANINGFUL[column] for column in unread})
    named, them = (f"column {unread[0]}", "it") if len(unread) == 1 else (f"columns {', '.join(unread)}", "them")
    under = "with no converter" if dataset.converter is None else f"under converter '{converter}'"
    raise SourceError(f"dataset '{dataset.name}': {named} ({' and '.join(carried)}) would be ignored {under}, "
                      f"{_consequence(unread)}; {_taker(unread, columns)}; if ignoring {them} is meant, set "
                      f"ignore_columns: [{', '.join(unread)}]")


def _consequence(unread: list[str]) -> str:
    if "label" in unread:
        return "which trains every answer, those labelled false too"
    return "which trains the rows without their pair"


def _taker(unread: list[str], columns: Sequence[str]) -> str:
    """Which converter takes rows with these columns, or that none does yet."""
    if "label" in unread:
        return "converter kto takes these rows (their label becomes v1's extra_info)"
    prompt = next((column for column in _V0_PROMPTS if column in columns), None)
    if prompt is not None:
        return (f"no converter takes these rows yet: {prompt} beside single chosen and rejected answers is "
                "LLaMA-Factory v0's ranking shape, and converter pair needs chosen and rejected as lists of "
                "{role, content} messages, the prompt included")
    return "they suggest converter: pair"
