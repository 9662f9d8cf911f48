"""What rendering a stored spec another way would delete, named before any entry is rendered.

A spec rendered again with another cutoff, template, truncation or tokenizer gets new lengths;
with them go the packing plans made from the old ones and its stored tokens, and the mixtures
drawn by token budgets under them are refused until drawn again: work none of which the render
writes again, nor was asked for by name. ``dataidx render`` refuses it without ``--replace``, as
``dataidx build`` refuses to build over a store that holds more than the build writes again; a
spec that holds nothing but its lengths is rendered again as before.
"""

from __future__ import annotations

import os

from ..errors import UsageError
from ..store import Mixtures, Plans, Specs, StoreHandle
from .spec import RenderSpec, read_spec


def refuse_to_replace(handle: StoreHandle, store: str | os.PathLike[str], spec: RenderSpec,
                      tokens: Specs.StoredTokenFile | None) -> None:
    """A UsageError naming what rendering stored spec ``spec.name`` as ``spec`` would delete (its
    plans, its stored ``tokens``, the mixtures its budgets drew) and what changed; None if nothing.

    Example::

        refuse_to_replace(handle, "demo.db", spec, Specs(handle).token_file(stored_id))
    """
    held = [f"packing plan '{name}'" for name in Plans(handle).of_spec(spec.name)]
    if tokens is not None:
        held.append(f"its stored tokens ({tokens.file})")
    held += [f"mixture '{name}' (drawn by token budgets)"
             for name in Mixtures(handle).drawn_by_budgets_under(spec.name)]
    if not held:
        return
    stored = read_spec(handle, spec.name)
    changed = [f"{what} {old} -> {new}" for what, old, new in (
        ("cutoff", stored.cutoff, spec.cutoff), ("truncation", stored.truncation, spec.truncation),
        ("escape", stored.escapes, spec.escapes), ("trust-remote-code", stored.trust_remote_code,
                                                   spec.trust_remote_code)) if old != new]
    if stored.tokenizer_sha256 != spec.tokenizer_sha256:
        changed.append("another tokenizer")
    if stored.template_text != spec.template_text:
        changed.append("another template")
    shown = held[0] if len(held) == 1 else ", ".join(held[:-1][:5]) + (
        f" and {len(held) - 5} more" if len(held) > 6 else f" and {held[-1]}")
    raise UsageError(f"{store}: render spec '{spec.name}' is stored rendered another way "
                     f"({', '.join(changed) or 'by another dataidx version, or at another clock'}); {shown} "
                     f"{'was' if len(held) == 1 else 'were'} made from its lengths, which rendering it again "
                     "replaces: pass --replace (plans and stored tokens are deleted, token-budget mixtures refused "
                     "until drawn again), or choose another --name")
