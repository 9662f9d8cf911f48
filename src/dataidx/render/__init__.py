"""Samples -> ``input_ids``/``labels``/``loss_weights`` through a chat template and a tokenizer,
and ``dataidx render``: every entry's token lengths and status, stored under a named spec.
Names are imported on first use: storing lengths writes through SQLAlchemy, serving them does not."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

# The same names for type checkers and editors (tests/test_layers.py keeps them equal); `name as name`
# re-exports each (PEP 484), so a checker reading an installed, py.typed dataidx finds it public.
if TYPE_CHECKING:
    from .causes import CAUSES as CAUSES
    from .causes import cause_advice as cause_advice
    from .causes import describe_cause as describe_cause
    from .chat_text import chat_messages as chat_messages
    from .chat_text import compile_template as compile_template
    from .chat_text import reads_clock as reads_clock
    from .escape import ESCAPES as ESCAPES
    from .fast_templates import FAST_TEMPLATES as FAST_TEMPLATES
    from .from_tokens import TokenServer as TokenServer
    from .from_tokens import open_tokens as open_tokens
    from .lengths import RenderSummary as RenderSummary
    from .lengths import render_store as render_store
    from .media_features import MediaServing as MediaServing
    from .provenance import remote_code_specs as remote_code_specs
    from .provenance import template_problems as template_problems
    from .rendered import IGNORE as IGNORE
    from .rendered import TRAINING_STATUSES as TRAINING_STATUSES
    from .rendered import Rendered as Rendered
    from .renderer import STATUSES as STATUSES
    from .renderer import Renderer as Renderer
    from .request import RenderRequest as RenderRequest
    from .runners import run_shards as run_shards
    from .served import RenderedMixture as RenderedMixture
    from .served import open_spec as open_spec
    from .served import render_positions as render_positions
    from .served import rendered_position as rendered_position
    from .shards import merge_parts as merge_parts
    from .shards import parse_shard as parse_shard
    from .shards import render_shard as render_shard
    from .spec import RenderSpec as RenderSpec
    from .spec import StoredSpec as StoredSpec
    from .spec import read_spec as read_spec
    from .spec import spec_fingerprint as spec_fingerprint
    from .templates import BUILTIN_TEMPLATES as BUILTIN_TEMPLATES
    from .templates import CHATML as CHATML
    from .templates import choose_template as choose_template
    from .token_check import TokensReport as TokensReport
    from .token_check import token_file_problems as token_file_problems
    from .token_check import verify_tokens as verify_tokens
    from .token_file import START as START
    from .token_file import TokenFile as TokenFile
    from .tokenizer_folder import load_tokenizer as load_tokenizer
    from .tokens import unrun as unrun
    from .truncation import TRUNCATIONS as TRUNCATIONS


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "CAUSES": ".causes",
    "cause_advice": ".causes",
    "describe_cause": ".causes",
    "chat_messages": ".chat_text",
    "compile_template": ".chat_text",
    "reads_clock": ".chat_text",
    "ESCAPES": ".escape",
    "FAST_TEMPLATES": ".fast_templates",
    "open_tokens": ".from_tokens",
    "TokenServer": ".from_tokens",
    "START": ".token_file",
    "TokenFile": ".token_file",
    "TokensReport": ".token_check",
    "token_file_problems": ".token_check",
    "verify_tokens": ".token_check",
    "unrun": ".tokens",
    "render_store": ".lengths",
    "RenderSummary": ".lengths",
    "RenderRequest": ".request",
    "IGNORE": ".rendered",
    "STATUSES": ".renderer",
    "TRAINING_STATUSES": ".rendered",
    "TRUNCATIONS": ".truncation",
    "Rendered": ".rendered",
    "Renderer": ".renderer",
    "template_problems": ".provenance",
    "remote_code_specs": ".provenance",
    "MediaServing": ".media_features",
    "run_shards": ".runners",
    "merge_parts": ".shards",
    "parse_shard": ".shards",
    "render_shard": ".shards",
    "RenderedMixture": ".served",
    "open_spec": ".served",
    "render_positions": ".served",
    "rendered_position": ".served",
    "RenderSpec": ".spec",
    "StoredSpec": ".spec",
    "load_tokenizer": ".tokenizer_folder",
    "spec_fingerprint": ".spec",
    "read_spec": ".spec",
    "BUILTIN_TEMPLATES": ".templates",
    "CHATML": ".templates",
    "choose_template": ".templates",
})
