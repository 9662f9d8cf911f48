"""What a source plugin is: the ``source`` registry, what a loader returns (:class:`Loaded`), and
the public :func:`register_source` through which a user's loader (ModelScope, an object store, a
database) becomes as much a part of a store as the built-in ``local`` and ``hf_hub``.

Kept apart from the built-in loaders so that a user's plugin imports only this (no ``datasets``),
and so that what a plugin returns is checked in one place, in the words of its own name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import SourceError
from ..plugins import Registry
from ..spec import DatasetSpec

if TYPE_CHECKING:
    from datasets import Dataset


class Loaded:
    """A loaded dataset and the source files it came from (empty for a remote hub dataset).

    The files are fingerprinted at build time, so opening or verifying the store notices when
    one changed. A loader that knows the Arrow files holding the whole split, in order, passes
    them as ``arrow_paths`` with ``open_dataset`` instead of a dataset: the build then reads
    those files itself and the ``datasets.Dataset`` is opened only if something asks for it.
    Opening one maps its files and touches most of their pages, which count in the process's
    memory while it lives: 0.7 GiB for a 1 GiB cache.
    """

    def __init__(self, dataset: Dataset | None = None, files: Sequence[str] = (), *,
                 arrow_paths: list[str] | None = None, open_dataset: Callable[[], Dataset] | None = None) -> None:
        if dataset is None and open_dataset is None:
            raise TypeError("Loaded needs a dataset or open_dataset")
        self._dataset, self._open, self.files = dataset, open_dataset, list(files)
        self.arrow_paths = arrow_paths

    @property
    def dataset(self) -> Dataset:
        if self._dataset is None:
            assert self._open is not None
            self._dataset = self._open()
        return self._dataset

    @dataset.setter
    def dataset(self, dataset: Dataset) -> None:
        """A plugin that wraps a loader may put another dataset in place: its own files then."""
        self._dataset, self.arrow_paths = dataset, None

    def cache_paths(self) -> list[str]:
        """The Arrow cache files of the dataset, without opening it when they are known."""
        if self.arrow_paths is not None:
            return self.arrow_paths
        return [entry["filename"] for entry in self.dataset.cache_files]


#: ``loader(spec, *, refresh=False)``; ``refresh`` asks it to bypass any cache of the source.
Loader = Callable[..., Loaded]
sources: Registry[Loader] = Registry("source")


def register_source(name: str, *, version: str = "1") -> Callable[[Loader], Loader]:
    """Register a user loader under ``name``; refer to it from YAML as ``source: name``.

    The loader is called as ``loader(spec, refresh=False)`` with the dataset's
    :class:`~dataidx.spec.DatasetSpec`: ``spec.path`` exactly as the YAML wrote it (only
    ``local`` paths are made absolute), ``spec.split``, ``spec.streaming``. It returns
    :class:`Loaded`: the ``datasets.Dataset`` and the local files it was read from, which the
    store fingerprints. ``refresh=True`` asks it to bypass its own cache (a file of the source
    changed after the cache was written). The store records ``version``: bump it when the
    loader reads the same source differently.

    Example::

        @register_source("modelscope", version="1")
        def modelscope(spec, *, refresh=False):
            folder = snapshot_download(spec.path)         # the files, local now
            files = sorted(glob.glob(f"{folder}/*.jsonl"))
            return Loaded(Dataset.from_json(files), files)
    """
    return sources.register(name, version=version)


def checked(loaded: Any, spec: DatasetSpec) -> Loaded:
    """``loaded`` if it is what a loader must return (its files as path strings); else a
    SourceError naming the source and dataset, so a plugin's mistake is one line at load time
    rather than a traceback from deep in the build."""
    from datasets import Dataset  # here, not at import: called only by a build that loads sources

    what = f"a {type(loaded).__name__}"
    if isinstance(loaded, Loaded):
        data = loaded._dataset
        if data is not None and not isinstance(data, Dataset):
            what = f"a Loaded holding a {type(data).__name__}"
        elif not all(isinstance(path, (str, os.PathLike)) for path in loaded.files):
            what = "a Loaded whose files are not all paths"
        else:
            loaded.files = [os.fspath(path) for path in loaded.files]
            return loaded
    raise SourceError(f"dataset '{spec.name}': source '{spec.source}' returned {what}; a source loader must "
                      "return dataidx.Loaded(dataset, files): a datasets.Dataset of the split and the local files "
                      "it was read from")
