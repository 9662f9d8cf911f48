"""The report's sections as HTML: each says what it counts (the mixture's positions, of every
epoch or of one) in its heading, and draws its figures from :class:`.figures.Figures`."""

from __future__ import annotations

import html

from ..errors import hide_passwords
from ..render import cause_advice, describe_cause
from . import charts
from .document import summary_facts
from .figures import Figures, PlanFigures
from .spec_figures import LISTED, SpecFigures


def table(header: list[str], rows: list[tuple]) -> str:
    head = "".join(f"<th>{html.escape(str(cell))}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "" if value is None else str(value)


def _chart(name: str, svg: str, **data: object) -> str:
    attributes = "".join(f" data-{key.replace('_', '-')}='{value}'" for key, value in data.items())
    return f"<figure class='chart' id='chart-{name}'{attributes}>{svg}</figure>"


def _over(figures: Figures) -> str:
    """What the figures count, for headings: 'all 3 epochs' or 'epoch 1'."""
    if figures.epoch is not None:
        return f"epoch {figures.epoch}"
    return "all positions" if len(figures.epochs) == 1 else f"all {len(figures.epochs)} epochs"


def summary(path: str, figures: Figures) -> str:
    mixture = figures.mixture
    facts = [("store", hide_passwords(path)), *summary_facts(figures).items()]
    sources = []
    for dataset in figures.info["datasets"]:
        files = dataset["files"]
        fingerprint = ", ".join(f.get("xxh3_128", "")[:12] for f in files[:3]) + (" ..." if len(files) > 3 else "")
        sources.append((dataset["name"], dataset["converter"], dataset["rows"], dataset["entries"],
                        sum(f.get("size", 0) for f in files), fingerprint, dataset["path"]))
    draws = [(name, str(d["seed"]), d["size"], d["weight"], d["token_budget"], d["supervised_token_budget"],
              d["requested"], d["entries"]) for name, d in mixture["datasets"].items()]
    stored_tokens = mixture["spec"] is not None
    per_epoch = [(epoch, str(seed), dataset, entries, rows, *((trains, tokens, supervised) if stored_tokens else ()))
                 for epoch, dataset, seed, entries, rows, trains, tokens, supervised in figures.epoch_draws]
    config = ("" if (figures.info["build"] or {}).get("config_sha256") == mixture["config_sha256"] else
              "<details><summary>The config that drew this mixture</summary><pre>"
              f"{html.escape(mixture['config_text'])}</pre></details>")
    return ("<section id='summary'><h2>Summary</h2>" + table(["", ""], facts) + config
            + "<h3>Sources</h3>"
            + table(["dataset", "converter", "rows", "entries", "bytes", "xxh3-128", "path"], sources)
            + _media(figures)
            + "<h3>Draws</h3><p>What the config asked of each dataset per epoch (<code>size</code>, "
            "<code>weight</code>, <code>tokens</code> and <code>supervised_tokens</code> budgets) and the entries "
            "drawn in all epochs.</p>"
            + table(["dataset", "seed", "size", "weight", "tokens budget", "supervised tokens budget", "requested",
                     "entries"], draws)
            + f"<h3>What each epoch drew ({_over(figures)})</h3>"
            + (f"<p>Tokens as counted under spec '{html.escape(mixture['spec'])}' when the mixture was drawn.</p>"
               if stored_tokens else "")
            + table(["epoch", "epoch seed", "dataset", "entries", "distinct rows",
                     *(("entries that train", "tokens", "supervised tokens") if stored_tokens else ())], per_epoch)
            + "</section>")


def _media(figures: Figures) -> str:
    """The media files each dataset's rows name (recorded at build, view ``media``), when any does,
    and under a processor's spec what its entries' media come to (:mod:`.media_figures`)."""
    named = [(d["name"], d.get("media_files") or 0, d.get("media_bytes") or 0) for d in figures.info["datasets"]]
    under = _media_under_spec(figures.spec) if figures.spec is not None and figures.spec.media else ""
    if not any(files for _, files, _ in named) and not under:
        return ""
    return ("<h3 id='media'>Media</h3><p>Distinct media files the rows name, read and hashed at build "
            "(<code>SELECT * FROM media</code> lists them; a fetch refuses one that changed).</p>"
            "<div class='media'>" + table(["dataset", "media files", "bytes"], named) + "</div>" + under)


def _media_under_spec(spec: SpecFigures) -> str:
    """Per dataset, media tokens against text tokens under ``spec``, and what media cost its entries."""
    rows = spec.media or []
    chart = charts.media_chart([row.dataset for row in rows], [(row.media_tokens, row.text_tokens) for row in rows])
    return (f"<h4 id='media-tokens'>Media under spec '{html.escape(spec.name)}'</h4><p>Base entries (not positions) "
            "of each dataset. Media tokens are the image placeholder tokens of the entries that train, as the "
            "spec's processor counts them (<code>media_tokens</code> joined through <code>entry_media</code>); text "
            "tokens are the rest of those entries' tokens (after truncation). Media tokens are counted before "
            "truncation: where an entry was truncated, the images past its cutoff, which training drops, count "
            "here too, and its text tokens that much fewer. Failed on media: render errors of cause "
            "<code>media</code> or <code>placeholders</code>; rejected for media: rows the build left out "
            "(<code>on_error: skip</code>) for a media file.</p>"
            + _chart("media", chart, marks=2 * len(rows)) + "<div class='media-spec'>"
            + table(["dataset", "entries with media", "media blocks", "of them train", "media tokens", "text tokens",
                     "media share", "truncated, with media", "failed on media", "rows rejected for media"],
                    [(row.dataset, row.entries, row.blocks, row.training_entries, row.media_tokens, row.text_tokens,
                      f"{row.media_share:.2%}", row.truncated, row.failed, row.rejected) for row in rows])
            + "</div>")


def mixture_section(figures: Figures) -> str:
    rows = figures.composition
    chart = charts.horizontal_bars("mixture", [r["dataset"] for r in rows], [int(r["entries"]) for r in rows],
                                   f"positions ({_over(figures)})")
    composition = table(["dataset", "positions", "share", "base entries", "distinct entries", "distinct rows",
                         "max repeats", "coverage"],
                        [(r["dataset"], r["entries"], f"{r['share']:.2%}", r["base_entries"], r["distinct_entries"],
                          r["distinct_rows"], r["max_repeats"], f"{r['coverage']:.2%}") for r in rows])
    return (f"<section id='mixture'><h2>Mixture '{html.escape(figures.mixture['name'])}': {figures.positions:,} "
            f"positions of {_over(figures)}</h2>" + _chart("mixture", chart, marks=len(rows)) + composition
            + f"<h3>Rows drawn, by their entries (supervised turns), {_over(figures)}</h3>"
            + _chart("turns", charts.turns_chart(figures.turns), marks=len(figures.turns)) + _skip_lists(figures)
            + _held_out(figures) + "</section>")


def _held_out(figures: Figures) -> str:
    """The store's evaluation rows (``build --val-size`` or ``--eval``): what mixture ``eval`` holds,
    or that this mixture leaves them out, as ``info`` and ``compose`` say it."""
    held = next((m for m in figures.info["mixtures"] if m.get("held_out_rows") is not None), None)
    if held is None:
        return ""
    count, name = held["held_out_rows"], html.escape(held["name"])
    rows = f"{count:,} row" + ("" if count == 1 else "s")
    said = (f"{rows} (every cut), which no other mixture draws" if figures.mixture["name"] == held["name"]
            else f"this mixture leaves out the {rows} held out for evaluation in mixture '{name}'")
    return f"<h3 id='held-out'>Held out for evaluation</h3><p class='held-out'>{said}.</p>"


def _skip_lists(figures: Figures) -> str:
    """The mixture's skip lists (``dataidx skip``): what its training orders leave out, and why."""
    lists = figures.mixture.get("skip_lists") or []
    if not lists:
        return ""
    return ("<h3>Skip lists: entries its training orders leave out</h3>"
            + table(["skip list", "entries", "who", "why", "asked", "when"],
                    [(s["name"], s["entries"], s["who"], s["why"], s["request"], s["created_at"]) for s in lists]))


def lengths(figures: Figures, spec: SpecFigures) -> str:
    """The lengths section, of ``figures.spec`` (the caller checks there is one)."""
    over = _over(figures)
    supervised = charts.horizontal_bars("supervised", [r[0] for r in spec.supervised],
                                        [int(r[3]) for r in spec.supervised], f"supervised tokens ({over})")
    per_epoch = "" if len(figures.epochs) == 1 or figures.epoch is not None else (
        "<h4>Per epoch</h4>" + table(["epoch", "dataset", "positions", "positions that train", "tokens",
                                      "supervised tokens"], spec.by_epoch))
    not_training = "<p>Every position trains.</p>"
    if spec.reasons:
        listed = table(["dataset", "row", "cut", "status", "tokens", "why", "times drawn"], spec.not_training)
        shown = min(LISTED, spec.not_training_entries)
        not_training = (table(["dataset", "status", "positions", "example"], spec.reasons)
                        + f"<details><summary>{spec.not_training_entries:,} distinct entries "
                          f"({spec.not_training_positions:,} positions) do not train; the {shown} drawn most often"
                          f"</summary>{listed}</details>")
    causes = "" if not spec.causes else (
        "<h3 id='causes'>Why base entries do not train</h3><p>Every entry of the spec (not positions), once per "
        "cause, with the first of them as an example.</p>"
        + table(["cause", "entries", "example", "what to do"],
                [(describe_cause(cause).words, entries, f"{dataset} row {row}" + (f" cut {cut}" if cut is not None
                  else "") + (f": {detail}" if detail else ""), cause_advice(cause) or "")
                 for cause, entries, dataset, row, cut, detail in spec.causes]))
    added = "" if not spec.added_tokens else (
        "<h3>Added tokens that are not special, in data text</h3><p>Base entries (not positions) whose data text "
        "holds an added token the tokenizer does not mark special: trained as its id, as LLaMA-Factory v1 does; "
        "<code>dataidx render --escape added</code> breaks them.</p>"
        + table(["dataset", "added token", "entries"], spec.added_tokens))
    return (f"<section id='lengths'><h2>Lengths under spec '{html.escape(spec.name)}', {over}</h2>"
            f"<p>The mixture's positions of each dataset by token count before truncation, coloured by status "
            f"(a repeated entry counts each time it is drawn).</p>"
            + _chart("lengths", charts.length_chart(spec), marks=len(spec.histogram), bin_width=spec.bin_width)
            + f"<h3>Supervised tokens per dataset, {over}</h3>" + _chart("supervised", supervised,
                                                                          marks=len(spec.supervised))
            + table(["dataset", "positions that train", "tokens", "supervised tokens"], spec.supervised) + per_epoch
            + f"<h3>Positions that will not train, and why, {over}</h3>" + not_training + causes + added
            + "</section>")


def packing(figures: Figures, plan: PlanFigures) -> str:
    """The packing section, of ``figures.plan`` (the caller checks there is one)."""
    unpacked = plan.entries * plan.capacity - plan.tokens
    packed = plan.packs * plan.capacity - plan.tokens
    facts = [("packs", plan.packs), ("entries", plan.entries), ("tokens", plan.tokens), ("fill", f"{plan.fill:.2%}"),
             ("positions left out by their status", plan.left_out),
             ("padding without packing (each entry padded to the capacity)", unpacked),
             ("padding with this plan", packed), ("padding saved", f"{1 - packed / unpacked:.2%}" if unpacked else "-")]
    epochs = "" if len(plan.epochs) == 1 else table(
        ["epoch", "seed", "packs", "entries", "tokens", "fill", "left out"],
        [(e, str(seed), packs, entries, tokens, f"{fill:.2%}", left) for e, seed, packs, entries, tokens, fill, left
         in plan.epochs])
    return (f"<section id='packing'><h2>Packing plan '{html.escape(plan.name)}' ({plan.capacity:,} tokens a pack), "
            f"{_over(figures)}</h2>" + _chart("fill", charts.fill_chart(plan), marks=len(plan.fill_histogram))
            + table(["", ""], facts) + epochs + _merges(plan) + _balance(plan) + "</section>")


def _balance(plan: PlanFigures) -> str:
    """A plan for a topology: each global step's costliest rank over the mean, drawn."""
    if plan.topology is None:
        return ""
    ranks, micro_batches, balance = plan.topology
    ratios = [ratio for _, _, ratio in plan.balance]
    worst = max(ratios, default=1.0)
    said = (f"<p id='plan-balance'>Made for {ranks} ranks taking {micro_batches} packs a step, balanced by "
            f"{html.escape(balance)}: over {len(ratios):,} global steps the costliest rank's estimated cost is at most "
            f"{worst:.3f}x the mean (mean {sum(ratios) / len(ratios) if ratios else 1.0:.3f}; view plan_balance).</p>")
    bars = -(-len(ratios) // charts.BALANCE_BARS) if ratios else 1
    return said + _chart("balance", charts.balance_chart(plan), steps=len(ratios), worst=f"{worst:.6f}",
                         marks=-(-len(ratios) // bars) if ratios else 0)


def _merges(plan: PlanFigures) -> str:
    """What ``--merge-cuts`` did with the plan's conversations: merged, as trees, or kept as cuts and why."""
    if plan.merge_cuts == "no":
        return ""
    before = sum(row[3] for row in plan.merges)
    after = sum(row[4] for row in plan.merges)
    said = (f"<p id='cut-merges'>Cuts merged ({html.escape(plan.merge_cuts)}): the conversations below forward "
            f"{after:,} tokens instead of {before:,} as cut entries"
            + (f" ({before / after:.2f}x fewer)" if after else "") + ", with every cut's supervised tokens trained "
            "in its own context.</p>")
    return said + table(["conversations", "how many", "cut entries", "tokens as cuts", "tokens forwarded"],
                        plan.merges)


def rejects(figures: Figures) -> str:
    if not figures.reject_counts:
        return ("<section id='rejects'><h2>Rejected rows (the build)</h2>"
                "<p>None: the build kept every row.</p></section>")
    return ("<section id='rejects'><h2>Rejected rows (the build)</h2>"
            + table(["dataset", "rows rejected"], figures.reject_counts)
            + table(["dataset", "row", "reason"], figures.rejects) + "</section>")
