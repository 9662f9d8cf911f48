"""``dataidx verify``: a store checked deeply against its sources, or its stored tokens against a
fresh rendering; exit 1 on any difference."""

from __future__ import annotations

import click

from .common import ProgressLine, echo, echo_json, json_option, shown, trust_option


@click.command()
@click.argument("store")
@click.option("--tokens", is_flag=True, help="Check the render specs' stored tokens instead: each token file's "
              "digest, and a seeded sample of entries rendered again and compared word for word.")
@click.option("--spec", help="With --tokens: only this spec [default: every spec with stored tokens].")
@click.option("--sample", type=click.IntRange(min=1), default=1000, show_default=True,
              help="With --tokens: training entries rendered again per spec.")
@click.option("--all", "every", is_flag=True, help="With --tokens: render every training entry again.")
@click.option("--seed", type=int, default=0, show_default=True, help="With --tokens: seed of the sample.")
@trust_option("Load the tokenizer of a spec rendered with --trust-remote-code (a class of its folder's own code), "
              "running that code, to check its template or re-render its entries.")
@json_option()
def verify(store: str, tokens: bool, spec: str | None, sample: int, every: bool, seed: int, trust_remote_code: bool,
           as_json: bool) -> None:
    """Check deeply that STORE still matches its sources; exit 1 on any change.

    Rehashes every source file and every recorded media file (a byte changed in place is found
    even with its size and mtime put back; a media file changed or gone is named), checks
    converter and loader versions, the Arrow data and SQLite's integrity, that each render spec's
    template is what the spec says it is (a built-in, the tokenizer's own, or its file), and that
    each stored token file is there and the one recorded (header, size; its words' digest is
    --tokens's). With --tokens, checks the stored tokens of render specs instead.
    A spec whose tokenizer runs its folder's code (rendered with --trust-remote-code) is named,
    and its tokenizer loaded only with --trust-remote-code.

    \b
    Example:
        dataidx verify demo.db --json
        dataidx verify demo.db --tokens --sample 10000
    """
    if tokens:
        _verify_tokens(store, spec=spec, sample=sample, every=every, seed=seed, as_json=as_json,
                       trust_remote_code=trust_remote_code)
        return
    if spec is not None or every:
        raise click.UsageError("--spec and --all check stored tokens: add --tokens")
    from ..read import verify_store
    from ..render import remote_code_specs, template_problems, token_file_problems

    report = verify_store(store)
    report["render_specs"] = template_problems(store, trust_remote_code=trust_remote_code)
    report["trust_remote_code"] = remote_code_specs(store)  # spec -> the folder whose code its tokenizer is
    for name, problems in token_file_problems(store).items():  # a store copied without its .tokens folder
        report["render_specs"][name] += problems
    report["ok"] = report["ok"] and not any(report["render_specs"].values())
    if as_json:
        echo_json(report)
    else:
        for line in report["integrity"]:
            echo(line)
        for name, problems in report["datasets"].items():
            echo(f"{name}: " + ("ok" if not problems else "; ".join(problems)))
        for problem in report["media"]:
            echo(problem)
        for name, problems in report["render_specs"].items():
            echo(f"render spec '{name}': " + ("ok" if not problems else "; ".join(problems)))
        for name, folder in report["trust_remote_code"].items():
            echo(f"render spec '{name}': its tokenizer runs code from {shown(folder)} (rendered with "
                 "--trust-remote-code)")
    if not report["ok"]:
        raise click.exceptions.Exit(1)


def _verify_tokens(store: str, *, spec: str | None, sample: int, every: bool, seed: int, as_json: bool,
                   trust_remote_code: bool) -> None:
    from ..render import verify_tokens

    reports = verify_tokens(store, spec=spec, sample=sample, seed=seed, every=every,
                            progress=ProgressLine("compared entries", as_json), trust_remote_code=trust_remote_code)
    if as_json:
        echo_json({"store": shown(store), "ok": all(r.ok for r in reports), "specs": [r.as_dict() for r in reports]})
    elif not reports:
        echo(f"{shown(store)}: no render spec has stored tokens (dataidx render --store-tokens stores them)")
    for report in reports if not as_json else ():
        verdict = "ok" if report.ok else "FAILED"
        echo(f"spec '{report.spec}': {verdict}: {report.checked:,} of {report.entries:,} training entries rendered "
             f"again, {report.different:,} differ from the stored tokens")
        for line in report.problems:
            echo(f"  {line}")
        for dataset, row, cut, what in report.mismatches:
            echo(f"  {dataset} row {row} cut {cut}: {what}")
    if not all(report.ok for report in reports):
        raise click.exceptions.Exit(1)



COMMANDS = [verify]
