"""Turn fetched entries into ``input_ids``, ``labels``, ``loss_weights`` and ``attention_mask``,
with LLaMA-Factory v1's labels.

v1's rule (its ``Renderer``, commit ff6d4d12): when the last message is the assistant turn, the
prompt is ``messages[:-1]`` rendered with the generation prompt, and every token after it (the
turn's text, its end-of-turn token and whatever the template writes after that, like ChatML's
newline) is supervised with the turn's loss weight. This holds when the prompt's ids are a prefix
of the whole's ids; where they are not (v1 raises there), or when the last message is not an
assistant turn, the supervised messages are located by characters instead (:meth:`ChatText.spans`)
and a token with any character in a span is supervised. The template writes every special token:
no BOS or EOS is added behind its back, as in ``apply_chat_template`` and v1 (a text document is
LLaMA-Factory's ``pt`` stage's instead: :mod:`.documents`). Data text is
escaped first (:mod:`.escape`). Texts of many entries go to the Rust tokenizer in one batch, each
shared prefix once (a prompt takes its ids from its whole's encoding: :mod:`.shared_prefix`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..convert import SUPERVISED_EPSILON, is_document, sample_problem, truncate
from ..errors import DataidxError, RenderError, bounded
from ..store import Specs
from .bounds import MESSAGE_LISTS, CutLeast, Extends, Least, TurnFloors
from .chat_text import ChatText, chat_messages, message_weight, sample_tools
from .documents import DocumentEnds, document_text
from .escape import ControlTokens, kept_detail
from .reasoning import marked, worst_reasoning
from .rendered import IGNORE, Rendered, label_tokens
from .shared_prefix import Encoded, SharedPrefixes, checked, encode_each, private_backend
from .sides import Draft, Side
from .slow import NOT_A_PREFIX, NOT_A_TURN, SlowBackend, WholeTexts, refuse_other
from .truncation import TRUNCATED_FACTOR, TRUNCATIONS, truncated

#: What an entry can come to under a spec, worst last (the store's, offered by this package's face).
STATUSES = Specs.STATUSES

NO_PROMPT = ("the trained turn is the conversation's first message, so it has no prompt to render: v1 renders the "
             "prompt with apply_chat_template, which refuses an empty conversation")


class Renderer:
    """Renders samples with one tokenizer, template, cutoff and truncation policy.

    Example::

        renderer = Renderer(tokenizer, BUILTIN_TEMPLATES["chatml"], cutoff=4096, truncation="right")
        renderer.render(sample, has_cut=True).as_dict()
        renderer.render_many([(sample, True), (other, True)])   # one tokenizer call for both

    ``escapes`` says which tokens data text may not produce as ids (:mod:`.escape`): ``special``
    (v1's control tokens; other added tokens are kept and named in ``Rendered.added``) or
    ``added`` (every added token).
    """

    def __init__(self, tokenizer: Any, template_text: str, cutoff: int, truncation: str = "drop", *,
                 clock: str | None = None, escapes: str = "special") -> None:
        refuse_other(tokenizer)
        if not 0 < cutoff < 2**31:
            raise RenderError(f"cutoff must be from 1 to {2**31 - 1} tokens, got {cutoff}")
        if truncation not in TRUNCATIONS:
            raise RenderError(f"unknown truncation '{truncation}' (one of {', '.join(TRUNCATIONS)})")
        self.tokenizer = tokenizer
        #: A fast tokenizer's offsets: without them (a slow one, :mod:`.slow`) v1's id diff alone labels.
        self.offsets = bool(getattr(tokenizer, "is_fast", False))
        # A private copy without truncation or padding: the caller's tokenizer may have them on
        # (a shipped tokenizer.json, or a call with truncation=True), which would bypass the cutoff.
        self.backend = private_backend(tokenizer) if self.offsets else SlowBackend(tokenizer)
        self.controls = ControlTokens(tokenizer, self.backend, escapes)
        self.shared = SharedPrefixes(self.backend) if self.offsets else WholeTexts()
        self.escapes = escapes
        self.cutoff = cutoff
        self.truncation = truncation
        self.bos_id = tokenizer.bos_token_id
        self.ends = DocumentEnds(tokenizer)
        # No token stands for more characters than the longest token's text has, so a text of
        # more than cutoff * longest characters has more than cutoff tokens: it is never
        # tokenized under "drop", and past TRUNCATED_FACTOR times that not under truncation either.
        self.longest = max(1, max((len(token) for token in self.backend.get_vocab(with_added_tokens=True)), default=1))
        self.hard_bound = (2 if truncation == "drop" else TRUNCATED_FACTOR) * cutoff * self.longest
        # The same bound in tokens, against the least count a sample's messages imply: their
        # characters, and the turn markers the template writes for each (see .bounds).
        self.token_bound = self.hard_bound // self.longest
        # A template may write or build, for one entry, a few times what the cutoff could ever keep.
        self.chat = ChatText(template_text, tokenizer.special_tokens_map, clock,  # clock: see ChatText
                             characters=4 * self.hard_bound + 2**20)
        added = set(tokenizer.added_tokens_decoder)  # split out before the model: one token each
        with self.chat.entry():  # the probes share one entry's time budget
            self.floors = TurnFloors.probe(self.chat, self.backend, (i for i in self.controls.ids if i in added))

    def render(self, sample: Mapping[str, Any], has_cut: bool) -> Rendered:
        """Render one fetched entry; errors become a ``render_error`` status, never an exception."""
        return self.render_many([(sample, has_cut)])[0]

    def render_many(self, items: Sequence[tuple[Mapping[str, Any], bool]]) -> list[Rendered]:
        """Render ``(sample, has_cut)`` pairs: every text first, then one batch for the tokenizer;
        each rendering keeps its sample's ``extra_info``."""
        done = self.finish_many([self.draft(sample, has_cut) for sample, has_cut in items])
        for (sample, _), rendered in zip(items, done):
            rendered.extra_info = extra_info(sample)
        return done

    def finish_many(self, drafts: list[Draft]) -> list[Rendered]:
        """Tokenize the texts of drafts (:meth:`draft_cuts`) in one batch, and label them.

        A prompt's ids are derived from its whole's encoding, and a side's from its reference's
        where it has one in the batch (:mod:`.shared_prefix`): one tokenizer pass per prefix."""
        sides = [side for draft in drafts if isinstance(draft, dict) for side in draft.values()]
        number = {id(side): k for k, side in enumerate(sides)}
        # Texts: every side's whole first (text k is side k's), then the prompts.
        roots = [number.get(id(side.reference)) if side.reference is not None and side.reference.reference is None
                 else None for side in sides]
        texts = [side.full for side in sides] + [side.prompt for side in sides if side.prompt is not None]
        references = roots + [k if roots[k] is None else roots[k] for k, side in enumerate(sides)
                              if side.prompt is not None]
        encoded = iter(self.shared.encode(self.backend, texts, references))
        wholes = [next(encoded) for _ in sides]
        tokens = {id(side): (whole, next(encoded) if side.prompt is not None else None)
                  for side, whole in zip(sides, wholes)}
        return [draft if isinstance(draft, Rendered) else self._finish(draft, tokens) for draft in drafts]

    def draft_cuts(self, whole: Mapping[str, Any], cuts: list[int], bounds: CutLeast) -> list[Draft]:
        """Drafts of the entries ``truncate(whole, cut)`` of one converted row, those :meth:`render_many`
        makes, with the row's messages made chat messages (escaped) once for all its cuts, not once
        per cut. ``bounds`` is ``floors.cuts(whole, longest)``; cuts past the bound by their count
        alone are the caller's to leave out (they would get the row's bound as their detail)."""
        messages = whole.get("messages")
        try:
            if not isinstance(messages, list) or "chosen_messages" in whole or "rejected_messages" in whole:
                raise TypeError("not one list of messages")
            top = messages[: max(cuts, default=0)]
            self.controls.kept.clear()
            tools = sample_tools(whole, self.controls)
            held = [tuple(sorted(self.controls.kept))]  # plain added tokens in tools and each prefix of messages
            chat: list[dict[str, Any]] = []
            for number, message in enumerate(top):
                chat += chat_messages([message], self.controls, number)
                held.append(held[-1] if len(held[-1]) == len(self.controls.kept) else tuple(sorted(self.controls.kept)))
            weights = [message_weight(message) for message in top]
        except Exception:  # some cut fails: each is drafted alone and says how, in order
            return [self.draft(truncate(whole, cut), True) for cut in cuts]
        drafts: list[Draft] = []
        for cut in cuts:
            with self.chat.entry():
                drafts.append(_holding(self.over(bounds[cut]) or self.guarded(lambda cut=cut: self._checked(
                    {None: self._side_of(chat[:cut], weights[:cut], tools, True)})), held[cut]))
        longest = [draft[None] for draft in drafts if isinstance(draft, dict)]
        for side in longest[:-1]:  # an earlier cut's text is most often the longest one's beginning
            side.reference = longest[-1]
        return drafts

    def draft(self, sample: Mapping[str, Any], has_cut: bool) -> Draft:
        """One entry's texts (``None`` for a single sequence, else chosen/rejected), for :meth:`finish_many`."""
        self.controls.kept.clear()
        with self.chat.entry():  # the entry's texts share one time budget
            made = self.guarded(lambda: self._over_bound(sample) or self._checked(self._sides(sample, has_cut)),
                                 sample)
        return _holding(made, tuple(sorted(self.controls.kept)))

    def _sides(self, sample: Mapping[str, Any], has_cut: bool) -> dict[str | None, Side]:
        if is_document(sample):
            return {None: Side(chat=[], weights=[], tools=None, options={}, full=document_text(sample, self.controls),
                                prompt=None, has_cut=False, document=True)}
        tools = sample_tools(sample, self.controls)
        if "chosen_messages" in sample or "rejected_messages" in sample:
            chosen, rejected = (self._side(sample.get(f"{side}_messages") or [], tools, False)
                                for side in ("chosen", "rejected"))
            rejected.reference = chosen  # the two answers follow one conversation
            return {"chosen": chosen, "rejected": rejected}
        return {None: self._side(sample.get("messages") or [], tools, has_cut)}

    def _checked(self, sides: dict[str | None, Side]) -> Draft:
        written = sum(len(side.full) for side in sides.values())
        if written > self.hard_bound:  # what the template wrapped around the messages took it past
            return self.too_long(written // self.longest, f"{written} characters of chat text")
        return sides

    def guarded(self, draft: Callable[[], Draft], sample: Mapping[str, Any] | None = None) -> Draft:
        """``draft()``, with what the data or the template raise as the entry's ``render_error``
        (for a ``sample`` not in the standard shape, what is wrong with it: a store built before
        the build refused such rows)."""
        try:
            return draft()
        except DataidxError as exc:
            return Rendered(status="render_error", detail=bounded(str(exc)),
                            cause=getattr(exc, "cause", None) or "format")
        except RecursionError:  # tool schemas or call arguments nested past the interpreter's limit
            return Rendered(status="render_error", detail="the sample nests too deep to render", cause="nested")
        except (AttributeError, TypeError, ValueError) as exc:  # a sample not in the standard shape
            problem = sample_problem(sample) if isinstance(sample, Mapping) else None
            return Rendered(status="render_error", detail=bounded(f"the sample is not in the standard format: "
                                                                  f"{problem or f'{type(exc).__name__}: {exc}'}"),
                            cause="format")

    def _over_bound(self, sample: Mapping[str, Any]) -> Rendered | None:
        """``too_long`` for an entry whose messages alone are past the hard bound: its chat text is
        neither written nor tokenized (one 100 MB row, a 4,000-turn row's later cuts), so a render
        costs what the cutoff allows, not what the data holds. The message count comes first, as in
        ``dataidx render`` before it reads a row: an entry gets one status and detail either way."""
        counts = [len(messages) for key in MESSAGE_LISTS if isinstance(messages := sample.get(key), list)]
        return self.over(self.floors.least_of_count(*counts)) or self.over(self.floors.least(sample, self.longest))

    def over(self, least: Least | Extends) -> Rendered | None:
        """``too_long`` when a lower bound on an entry's tokens (:mod:`.bounds`) is past the bound."""
        return self.too_long(least.tokens, str(least)) if least.tokens > self.token_bound else None

    def too_long(self, least: int, what: str) -> Rendered:
        return Rendered(status="too_long", full_tokens=least, cause="too_long",
                        detail=f"{what}, so at least {least} tokens > cutoff {self.cutoff}; not tokenized "
                               f"(past {self.token_bound} tokens)")

    def _side(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, has_cut: bool) -> Side:
        chat = chat_messages(messages, self.controls)
        return self._side_of(chat, [message_weight(message) for message in messages], tools, has_cut)

    def _side_of(self, chat: list[dict[str, Any]], weights: list[float], tools: list[dict[str, Any]] | None,
                 has_cut: bool) -> Side:
        options: dict[str, Any] = {}
        prompt = None
        if chat and chat[-1]["role"] == "assistant":  # v1's case: the last turn is the one trained
            if len(chat) == 1:
                raise RenderError(NO_PROMPT, cause="no_prompt")
            options["enable_thinking"] = bool(chat[-1].get("reasoning_content"))
            prompt = self.chat.text(chat[:-1], tools, True, **options)
        return Side(chat=chat, weights=weights, tools=tools, options=options,
                     full=self.chat.text(chat, tools, False, **options), prompt=prompt, has_cut=has_cut)

    def _finish(self, draft: dict[str | None, Side], tokens: dict[int, tuple[Encoded, Encoded | None]]
                ) -> Rendered:
        try:
            sides = {name: self._labelled(side, *tokens[id(side)]) for name, side in draft.items()}
        except DataidxError as exc:
            return Rendered(status="render_error", detail=bounded(str(exc)),
                            cause=getattr(exc, "cause", None) or "format")
        added = next(iter(draft.values())).added
        if None in sides:
            return _holding(sides[None], added)
        pair = {name: side for name, side in sides.items() if name is not None}  # chosen and rejected
        worst = max((side.status for side in pair.values()), key=STATUSES.index)
        return _holding(Rendered(status=worst, full_tokens=sum(s.full_tokens for s in pair.values()),
                                 detail="; ".join(f"{k}: {s.detail}" for k, s in pair.items() if s.detail) or None,
                                 sides=pair, cause=next(s.cause for s in pair.values() if s.status == worst),
                                 reasoning=worst_reasoning(s.reasoning for s in pair.values())), added)

    def _labelled(self, side: Side, full: Encoded, prompt: Encoded | None) -> Rendered:
        checked(full, prompt)  # a text the tokenizer failed on: this entry's render_error
        if side.document:
            return self._truncate(*self.ends.tokens(full.ids))
        ids = full.ids
        prompt_ids = prompt.ids if prompt is not None else None
        if prompt_ids is not None and ids[: len(prompt_ids)] == prompt_ids:  # v1's token diff
            start, weight = len(prompt_ids), side.weights[-1]
            tail = ids[start:] if weight > SUPERVISED_EPSILON else [IGNORE] * (len(ids) - start)
            return marked(self._truncate(ids, [IGNORE] * start + tail, [0.0] * start + [weight] * (len(ids) - start)),
                          side, [(len(side.prompt or ""), len(side.full))])  # v1's rule: what follows the prompt
        if not self.offsets:  # a slow tokenizer: v1's refusal, with no characters to label by instead
            raise (RenderError(NOT_A_PREFIX, cause="not_a_prefix") if prompt is not None
                   else RenderError(NOT_A_TURN, cause="not_a_turn"))
        if prompt is not None or side.has_cut:
            wanted = [len(side.chat) - 1] if side.chat else []
        else:
            wanted = list(range(len(side.chat)))
        with self.chat.entry():  # locating messages renders prefixes: a time budget of their own
            spans = self.chat.spans(side.chat, side.weights, side.tools, full=side.full, wanted=wanted, **side.options)
        encoding = full.encoding  # a derived whole has no offsets: tokenized whole here (v1's diff failed)
        if encoding is None:
            encoding = encode_each(self.backend, [side.full])[0]
            checked(encoding)
        labels, weights = label_tokens(ids, encoding.offsets, spans)
        return marked(self._truncate(ids, labels, weights), side, [(span.start, span.end) for span in spans])

    def _truncate(self, ids: list[int], labels: list[int], weights: list[float]) -> Rendered:
        return truncated(ids, labels, weights, cutoff=self.cutoff, truncation=self.truncation, bos_id=self.bos_id)


def extra_info(sample: Mapping[str, Any]) -> str | None:
    """A sample's ``extra_info`` (text, or None): what the build let through (:func:`sample_problem`)."""
    found = sample.get("extra_info") if isinstance(sample, Mapping) else None
    return found if isinstance(found, str) else None


#: A draft or a finished rendering: :func:`_holding` gives back what it is given.
_Held = TypeVar("_Held", bound=Draft)


def _holding(draft: _Held, added: tuple[str, ...]) -> _Held:
    """``draft`` recording the plain added tokens its entry's data text holds; an entry that trains
    says so in its detail (one that does not keeps the reason why)."""
    if added:
        if isinstance(draft, Rendered):
            draft.added = added
            if draft.trains and draft.detail is None:
                draft.detail = kept_detail(added)
        else:
            next(iter(draft.values())).added = added
    return draft
