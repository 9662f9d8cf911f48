"""Where a stored spec's template came from, checked: ``dataidx verify`` names the ones it cannot vouch for.

Readers run the template text a store holds. Its fingerprint proves nothing about it (anyone can
hash a crafted template with the rest of a spec), so ``verify`` asks where the text came from,
as the spec records it: a built-in must be this dataidx's built-in of that name, ``tokenizer``
the ``chat_template`` of the tokenizer at the recorded path, a file that file's text now. A
template that is none of these still renders under the sandbox's budget (:mod:`.sandbox`); it is
named so that someone looks at it before training on it. So is a spec whose tokenizer is a class
of its folder's own code (``--trust-remote-code``): its folder is loaded, to compare its template,
only when verify is trusted too (:func:`remote_code_specs` names them either way).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import DataidxError, shown
from ..store import Specs, Store, StoreHandle, reading
from .templates import BUILTIN_TEMPLATES
from .tokenizer_folder import load_tokenizer


def template_problems(store: Store | StoreHandle, *, trust_remote_code: bool = False) -> dict[str, list[str]]:
    """``{spec: [problems]}`` for every render spec of ``store``; an empty list is a template
    that is what the spec says it is. A spec whose tokenizer runs its folder's code is loaded to
    compare only with ``trust_remote_code``; without it, that it was not checked is its problem."""
    with reading(store) as handle:
        specs = Specs(handle).templates()
    return {name: [f"its tokenizer at {shown(tokenizer)} is a class of its folder's own code (rendered with "
                   "--trust-remote-code), not loaded to check its template: give --trust-remote-code to run it"]
            if remote and not trust_remote_code else _problems(template, text, tokenizer, remote)
            for name, template, text, tokenizer, remote in specs}


def remote_code_specs(store: Store | StoreHandle) -> dict[str, str]:
    """``{spec: tokenizer folder}`` of the specs whose tokenizer is a class of its folder's own
    code (rendered with ``--trust-remote-code``): what ``verify`` names."""
    with reading(store) as handle:
        return {name: tokenizer for name, _, _, tokenizer, remote in Specs(handle).templates() if remote}


def _problems(template: str, text: str, tokenizer: str, remote: bool = False) -> list[str]:
    size = f"its template ({len(text)} characters)"
    if template in BUILTIN_TEMPLATES:
        if text == BUILTIN_TEMPLATES[template]:
            return []
        return [f"{size} is not built-in template '{template}' as this dataidx has it: a store made by another "
                "version, or edited; readers run it as it is"]
    if template == "tokenizer":
        try:
            own = getattr(load_tokenizer(tokenizer, trust_remote_code=remote), "chat_template", None)
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
