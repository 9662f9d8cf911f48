"""YAML -> :class:`~dataidx.spec.Config`: LLaMA-Factory v1 configs checked in one pass, and
LLaMA-Factory v0's ``dataset_info.json`` turned into one."""

from .load import load_config, parse_datasets
from .v0_import import Imported, import_dataset_info

__all__ = ["Imported", "import_dataset_info", "load_config", "parse_datasets"]
