"""Where a stored spec's template came from, checked: ``dataidx verify`` names the ones it cannot vouch for.

Readers run the template text a store holds. Its fingerprint proves nothing about it (anyone can
hash a crafted template with the rest of a spec), so ``verify`` asks where the text came from,
as the spec records it: a built-in must be this dataidx's built-in of that name, ``tokenizer``
the ``chat_template`` of the tokenizer at the recorded path, a file that file's text now. A
template that is none of these still renders under the sandbox's budget (:mod:`.sandbox`); it is
named so that someone looks at it before training on it.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DataidxError, shown
from ..store import Specs, Store, StoreHandle, reading
from .templates import BUILTIN_TEMPLATES
from .tokenizer_folder import load_tokenizer


def template_problems(store: Store | StoreHandle) -> dict[str, list[str]]:
    """``{spec: [problems]}`` for every render spec of ``store``; an empty list is a template
    that is what the spec says it is."""
    with reading(store) as handle:
        specs = Specs(handle).templates()
    return {name: _problems(template, text, tokenizer) for name, template, text, tokenizer in specs}


def _problems(template: str, text: str, tokenizer: str) -> list[str]:
    size = f"its template ({len(text)} characters)"
    if template in BUILTIN_TEMPLATES:
        if text == BUILTIN_TEMPLATES[template]:
            return []
        return [f"{size} is not built-in template '{template}' as this dataidx has it: a store made by another "
                "version, or edited; readers run it as it is"]
    if template == "tokenizer":
        try:
            own = getattr(load_tokenizer(tokenizer), "chat_template", None)
        except DataidxError as exc:
            return [f"{size} is said to be the tokenizer's own, but the tokenizer cannot be loaded to compare: {exc}"]
        own = own.get("default") if isinstance(own, dict) else own
        if text == own:
            return []
        return [f"{size} is not the chat_template of the tokenizer at {shown(tokenizer)}: the tokenizer changed, or "
                "the store was edited; readers run it as it is"]
    path = Path(template)
    if path.is_absolute() and path.is_file():
        try:
            if path.read_text(encoding="utf-8") == text:
                return []
        except (OSError, UnicodeDecodeError):
            pass
        return [f"{size} is not the text of {shown(template)} now: the file changed since it was rendered, or the "
                "store was edited; readers run the stored text"]
    return [f"{size} matches no built-in template, no tokenizer's own and no file (recorded as {shown(template)}); "
            "readers run it as it is"]
