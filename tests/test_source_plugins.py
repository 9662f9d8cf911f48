"""Issue 52 item 10: a user's source is as much a plugin as a converter. A ModelScope-style loader
(a fake hub: a local folder named by an environment variable, so nothing leaves the machine)
registered with ``dataidx.register_source``, given the dataset id as the YAML wrote it, built into
a store through ``dataidx --plugins``, fetched back and verified; its files fingerprinted like a
local source's. A source nobody registered, and one returning the wrong thing, are one line."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.config import load_config
from dataidx.plugins import load_entry_point_plugins
from dataidx.sources import Loaded, register_source, sources
from dataidx.spec import DatasetSpec

from .helpers import one_line_error, write_jsonl, write_yaml

#: The plugin a user would write: "download" the dataset (here: find it in the fake hub's folder),
#: then load its files as ``datasets`` does, and name them so the store fingerprints them.
MODELSCOPE = '''
import os
from pathlib import Path

from datasets import Dataset

from dataidx import Loaded, register_source


@register_source("modelscope", version="1")
def modelscope(spec, *, refresh=False):
    """spec.path is the dataset id as written ("someone/ds"); its split is a JSON Lines file."""
    folder = Path(os.environ["FAKE_MODELSCOPE_HUB"]) / spec.path
    files = sorted(str(path) for path in folder.glob(f"{spec.split}*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{spec.path} has no split '{spec.split}' on the hub")
    return Loaded(Dataset.from_json(files), files)
'''

ROWS = [{"instruction": f"say {i}", "input": "", "output": f"{i}"} for i in range(4)]


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names of sources a test registers, and plugin modules it loads, forgotten after it, so the
    rest of the process sees only the built-in sources."""
    names: list[str] = []
    yield names
    for name in names:
        sources._plugins.pop(name, None)
        sys.modules.pop(f"dataidx_plugin_{name}", None)


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ModelScope hub holding someone/ds, a plugin module, and a YAML asking for both,
    run from a working directory of its own (where someone/ds is not)."""
    write_jsonl(tmp_path / "hub" / "someone" / "ds" / "train.jsonl", ROWS)
    monkeypatch.setenv("FAKE_MODELSCOPE_HUB", str(tmp_path / "hub"))
    (tmp_path / "modelscope.py").write_text(MODELSCOPE)
    write_yaml(tmp_path / "ms.yaml", "ms:\n  path: someone/ds\n  source: modelscope\n  converter: alpaca\n")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path


def test_a_modelscope_plugin_builds_fetches_and_verifies(hub: Path, registered: list[str]) -> None:
    registered.append("modelscope")
    runner, store = CliRunner(), str(hub / "ms.db")
    with_plugin = ["--plugins", str(hub / "modelscope.py")]
    built = runner.invoke(cli, [*with_plugin, "build", str(hub / "ms.yaml"), "-o", store, "-q"])
    assert built.exit_code == 0, built.output
    shown = runner.invoke(cli, [*with_plugin, "show", store, "3"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["messages"][1]["content"][0]["value"] == "3"
    listed = runner.invoke(cli, ["query", store, "SELECT path, source FROM datasets", "--json"])
    assert json.loads(listed.stdout) == [{"path": "someone/ds", "source": "modelscope"}]  # as written
    assert runner.invoke(cli, [*with_plugin, "verify", store]).exit_code == 0
    write_jsonl(hub / "work" / "someone" / "ds" / "other.jsonl", ROWS)  # a folder here named like the id
    verified = runner.invoke(cli, [*with_plugin, "verify", store])  # is not the source's: its files are its own
    assert verified.exit_code == 0, verified.output
    write_jsonl(hub / "hub" / "someone" / "ds" / "train.jsonl", [*ROWS, *ROWS])
    verified = runner.invoke(cli, [*with_plugin, "verify", store])  # its files were fingerprinted
    changed = str(hub / "hub" / "someone" / "ds" / "train.jsonl")
    assert verified.exit_code == 1 and changed in verified.output, verified.output
    sources._plugins.pop("modelscope")  # a process without the plugin: the store names what it needs
    verified = runner.invoke(cli, ["verify", store])
    assert verified.exit_code == 1 and "loader 'modelscope' is not registered" in verified.output


def test_the_python_api_registers_a_source_and_serves_it(hub: Path, registered: list[str]) -> None:
    from dataidx import StoreReader, build

    registered.append("modelscope")
    seen: list[str] = []
    namespace: dict[str, object] = {}
    exec(MODELSCOPE, namespace)  # the plugin's own code, registered in this process

    def wrapped(spec, *, refresh: bool = False) -> Loaded:  # the plugin's loader, noting what it is given
        seen.append(spec.path)
        return namespace["modelscope"](spec, refresh=refresh)  # type: ignore[operator]

    with pytest.warns(UserWarning, match="source plugin 'modelscope' is registered again; replacing it"):
        register_source("modelscope", version="2")(wrapped)

    build(hub / "ms.yaml", hub / "api.db")
    with StoreReader(hub / "api.db") as reader:
        sample: dict[str, Any] = dict(reader.get(2))
    assert sample["messages"][0]["content"][0]["value"] == "say 2"
    assert seen == ["someone/ds"] and sources.get("modelscope").version == "2"


def test_only_a_local_path_is_made_absolute(hub: Path, registered: list[str]) -> None:
    registered.append("elsewhere")
    write_jsonl(hub / "work" / "d.jsonl", ROWS)

    @register_source("elsewhere")
    def never_called(spec: DatasetSpec, *, refresh: bool = False) -> Loaded:
        raise AssertionError("a config is read without loading its sources")

    config = write_yaml(hub / "paths.yaml", "a:\n  path: someone/ds\n  source: elsewhere\n"
                                            "b:\n  path: d.jsonl\n  source: local\n"
                                            "c:\n  path: ./d.jsonl\n  source: elsewhere\n")
    paths = [dataset.path for dataset in load_config(config).datasets]
    assert paths == ["someone/ds", str(hub / "work" / "d.jsonl"), "./d.jsonl"]


def test_an_unregistered_source_says_how_to_register_one(hub: Path) -> None:
    found = CliRunner().invoke(cli, ["build", str(hub / "ms.yaml"), "-o", str(hub / "ms.db")])
    one_line_error(found, f"{hub / 'ms.yaml'}", "dataset 'ms': key 'source': unknown source 'modelscope'",
                   "@dataidx.register_source", "dataidx --plugins", "dataidx.plugins")
    assert not (hub / "ms.db").exists()


@pytest.mark.parametrize("returned, what", [
    ("[{'instruction': 'x', 'output': 'y'}]", "returned a list"),
    ("Dataset.from_list([{'instruction': 'x', 'output': 'y'}])", "returned a Dataset"),
    ("Loaded(DatasetDict(train=Dataset.from_list([{'instruction': 'x'}])))", "returned a Loaded holding a DatasetDict"),
    ("Loaded(Dataset.from_list([{'instruction': 'x'}]), [1])", "returned a Loaded whose files are not all paths"),
])
def test_a_source_returning_the_wrong_thing_is_one_line(hub: Path, registered: list[str], returned: str,
                                                         what: str) -> None:
    registered.append("wrong")
    (hub / "wrong.py").write_text("from datasets import Dataset, DatasetDict\nfrom dataidx import Loaded, "
                                  "register_source\n\n@register_source('modelscope')\n"
                                  f"def wrong(spec, *, refresh=False):\n    return {returned}\n")
    registered.append("modelscope")
    found = CliRunner().invoke(cli, ["--plugins", str(hub / "wrong.py"), "build", str(hub / "ms.yaml"),
                                     "-o", str(hub / "ms.db"), "-q"])
    one_line_error(found, f"dataset 'ms': source 'modelscope' {what}; a source loader must return "
                          "dataidx.Loaded(dataset, files)")
    assert not (hub / "ms.db").exists()


def test_an_installed_package_registers_a_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 registered: list[str]) -> None:
    registered.append("modelscope")
    site = tmp_path / "site"
    info = site / "fake_dataidx_source-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-dataidx-source\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dataidx.plugins]\nms = fake_dataidx_source_module\n")
    (site / "fake_dataidx_source_module.py").write_text(MODELSCOPE)
    monkeypatch.syspath_prepend(str(site))
    assert "modelscope" not in sources
    assert "ms" in load_entry_point_plugins()
    assert sources.get("modelscope").version == "1"
    sys.modules.pop("fake_dataidx_source_module", None)


def test_a_source_that_fails_is_one_line_naming_it(hub: Path, registered: list[str]) -> None:
    registered.append("modelscope")
    write_yaml(hub / "ms.yaml", "ms:\n  path: someone/ds\n  source: modelscope\n  split: test\n")
    found = CliRunner().invoke(cli, ["--plugins", str(hub / "modelscope.py"), "build", str(hub / "ms.yaml"),
                                     "-o", str(hub / "ms.db"), "-q"])
    one_line_error(found, "dataset 'ms': cannot load someone/ds through source 'modelscope': "
                          "someone/ds has no split 'test' on the hub")
    assert not (hub / "ms.db").exists()
