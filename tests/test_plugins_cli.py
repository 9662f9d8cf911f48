"""User converters from --plugins modules and from installed packages' entry points."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dataidx.cli import cli
from dataidx.convert import converters
from dataidx.plugins import load_entry_point_plugins

from .helpers import write_jsonl

PLUGIN = '''
from dataidx import register_converter

@register_converter("qa_plugin_test", version="2")
def qa(row):
    return {"messages": [
        {"role": "user", "content": [{"type": "text", "value": row["q"]}], "loss_weight": 0.0},
        {"role": "assistant", "content": [{"type": "text", "value": row["a"]}], "loss_weight": 1.0},
    ]}
'''


def test_plugins_option_registers_a_converter_for_build_and_show(tmp_path: Path) -> None:
    (tmp_path / "my_converters.py").write_text(PLUGIN)
    write_jsonl(tmp_path / "qa.jsonl", [{"q": "hi", "a": "hello"}, {"q": "2+2", "a": "4"}])
    config = tmp_path / "qa.yaml"
    config.write_text(f"qa:\n  path: {tmp_path / 'qa.jsonl'}\n  source: local\n  converter: qa_plugin_test\n")
    runner = CliRunner()
    converters._plugins.pop("qa_plugin_test", None)
    result = runner.invoke(cli, ["build", str(config), "-o", str(tmp_path / "qa.db")])
    assert result.exit_code == 1 and "unknown converter 'qa_plugin_test'" in result.output
    plugin = str(tmp_path / "my_converters.py")
    result = runner.invoke(cli, ["--plugins", plugin, "build", str(config), "-o", str(tmp_path / "qa.db"), "-q"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["--plugins", plugin, "show", str(tmp_path / "qa.db"), "1"])
    assert result.exit_code == 0 and '"value": "4"' in result.stdout
    result = runner.invoke(cli, ["--plugins", "no_such_module_here", "info", str(tmp_path / "qa.db")])
    assert result.exit_code == 1
    assert "cannot load plugin module 'no_such_module_here': ModuleNotFoundError" in result.output


def test_entry_points_of_installed_packages_register_plugins(tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / "site"
    (site / "fake_dataidx_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "fake_dataidx_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fake-dataidx-plugin\nVersion: 1.0\n")
    (site / "fake_dataidx_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[dataidx.plugins]\nqa = fake_dataidx_plugin_module\n")
    (site / "fake_dataidx_plugin_module.py").write_text(PLUGIN.replace("qa_plugin_test", "qa_entry_point_test"))
    monkeypatch.syspath_prepend(str(site))
    assert "qa_entry_point_test" not in converters
    assert "qa" in load_entry_point_plugins()
    assert converters.get("qa_entry_point_test").version == "2"
