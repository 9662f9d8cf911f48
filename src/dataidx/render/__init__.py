"""Samples -> ``input_ids``/``labels``/``loss_weights`` through a chat template and a tokenizer,
and ``dataidx render``: every entry's token lengths and status, stored under a named spec.
Names are imported on first use: storing lengths writes through SQLAlchemy, serving them does not."""

from typing import TYPE_CHECKING

from .._lazy import lazy_face

if TYPE_CHECKING:  # the same names, for type checkers and editors (tests/test_layers.py keeps them equal)
    from .causes import CAUSES, cause_advice, describe_cause
    from .chat_text import chat_messages, compile_template, reads_clock
    from .escape import ESCAPES
    from .fast_templates import FAST_TEMPLATES
    from .lengths import RenderSummary, render_store
    from .provenance import template_problems
    from .rendered import IGNORE, TRAINS, Rendered
    from .renderer import STATUSES, TRUNCATIONS, Renderer
    from .served import RenderedMixture, open_spec, render_positions, rendered_position
    from .spec import RenderSpec, StoredSpec, load_tokenizer, read_spec, spec_fingerprint
    from .templates import BUILTIN_TEMPLATES, CHATML, choose_template


__all__, __getattr__, __dir__ = lazy_face(__name__, {
    "CAUSES": ".causes",
    "cause_advice": ".causes",
    "describe_cause": ".causes",
    "chat_messages": ".chat_text",
    "compile_template": ".chat_text",
    "reads_clock": ".chat_text",
    "ESCAPES": ".escape",
    "FAST_TEMPLATES": ".fast_templates",
    "render_store": ".lengths",
    "RenderSummary": ".lengths",
    "IGNORE": ".rendered",
    "STATUSES": ".renderer",
    "TRAINS": ".rendered",
    "TRUNCATIONS": ".renderer",
    "Rendered": ".rendered",
    "Renderer": ".renderer",
    "template_problems": ".provenance",
    "RenderedMixture": ".served",
    "open_spec": ".served",
    "render_positions": ".served",
    "rendered_position": ".served",
    "RenderSpec": ".spec",
    "StoredSpec": ".spec",
    "load_tokenizer": ".spec",
    "spec_fingerprint": ".spec",
    "read_spec": ".spec",
    "BUILTIN_TEMPLATES": ".templates",
    "CHATML": ".templates",
    "choose_template": ".templates",
})
