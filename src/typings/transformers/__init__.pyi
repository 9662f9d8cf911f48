"""What dataidx calls of ``transformers``, for pyright alone (``[tool.pyright] stubPath``).

transformers' ``__init__`` declares every model it ships for type checkers: binding it costs
pyright over 20 s of a 60 s check of this package, to type one ``from_pretrained`` call whose
result dataidx holds as ``Any``. A name missing here is still an error in the check.
"""

from typing import Any

class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str, *inputs: Any, **kwargs: Any) -> Any: ...

class PreTrainedTokenizerFast:
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str, *inputs: Any, **kwargs: Any) -> Any: ...
