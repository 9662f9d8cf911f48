"""What an entry past the cutoff becomes: ``too_long`` (``drop``), or its first or last
``cutoff`` tokens (``right``, ``left``), with the status saying so."""

from __future__ import annotations

from .rendered import Rendered

TRUNCATIONS = ("drop", "right", "left")
#: Under right or left truncation an entry is rendered up to this many times the text that must
#: be over the cutoff (the part kept is decided on its tokens); past it, it is ``too_long``.
TRUNCATED_FACTOR = 4


def truncated(ids: list[int], labels: list[int], weights: list[float], *, cutoff: int, truncation: str,
              bos_id: int | None) -> Rendered:
    """The rendering of a labelled entry under ``truncation``; ``no_supervision`` when nothing trains."""
    full = len(ids)
    status = "ok"
    if full > cutoff:
        if truncation == "drop":
            return Rendered(input_ids=ids, labels=labels, loss_weights=weights, status="too_long", full_tokens=full,
                            detail=f"{full} tokens > cutoff {cutoff}", cause="too_long")
        status = "truncated"
        if truncation == "right":
            ids, labels, weights = ids[:cutoff], labels[:cutoff], weights[:cutoff]
        else:  # left: keep the end, which holds the supervised turn, and the BOS if any
            keep = 1 if bos_id is not None and ids[0] == bos_id and cutoff > 1 else 0
            start = full - (cutoff - keep)
            ids, labels, weights = (ids[:keep] + ids[start:], labels[:keep] + labels[start:],
                                    weights[:keep] + weights[start:])
    rendered = Rendered(input_ids=ids, labels=labels, loss_weights=weights, status=status, full_tokens=full)
    if rendered.supervised_tokens == 0:
        rendered.status, rendered.cause = "no_supervision", "no_supervision"
        rendered.detail = ("no supervised token left after truncation" if status == "truncated"
                           else "no supervised message")
    return rendered
