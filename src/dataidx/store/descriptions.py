"""What every table and view of a store holds, one line each: the store's own description of
itself, which ``dataidx serve`` shows beside each name (docs/sql.md documents the views,
docs/store.md the tables). Kept with the schema, the one place that may name a table.
"""

from __future__ import annotations

#: One line per table and view of a store: what one row is.
DESCRIPTIONS = {
    # views: the stable interface (docs/sql.md)
    "entries": "One row per position of a mixture: the (dataset, row, cut) it serves, and its epoch.",
    "composition": "One row per dataset of a mixture: entries, distinct rows and share.",
    "turns": "One row per source row of the base index: its entries (supervised turns) and last cut.",
    "repeats": "One row per distinct entry of a mixture: how many positions repeat it.",
    "rejects": "One row per source row a build left out under on_error: skip, with the reason.",
    "media": "One row per distinct media file a build's rows name: kind, resolved path, bytes, digest, what its "
             "header says (size; frames, fps, duration; samples, rate, channels) and the rows and entries using it.",
    "entry_media": "One row per media block of a base entry, in order: the media of its messages below its cut, the "
                   "path as written and as resolved.",
    "media_tokens": "One row per media file under a render spec with a processor: its placeholder tokens and grid "
                    "(grid_t, grid_h, grid_w) as that processor counts them.",
    "duplicates": "One row per base entry a near-duplicate list (dataidx dedup) flags: the representative row it "
                  "duplicates and the two rows' word 5-gram Jaccard, verified exactly.",
    "exact_duplicates": "One row per base entry whose messages another entry shares exactly (surrounding whitespace "
                        "trimmed), found at build: the group's digest, size and representative (its first entry).",
    "same_prompts": "One row per base entry whose prompt side another entry shares: the group's entries and distinct "
                    "answers. The same prompt with another answer is data, not a duplicate.",
    "contamination": "One row per base entry and eval set a decontamination list (dataidx decontaminate) flags: the "
                     "eval item, its score (longest span found over the item's words) and the span.",
    "entry_lengths": "One row per base entry under a render spec: tokens, supervised tokens, status and why.",
    "pack_plans": "One row per packing plan: capacity, seed, packs, fill and positions left out.",
    "pack_members": "One row per member of a pack: the mixture position it holds, its tokens and epoch.",
    "plan_balance": "One row per rank of each whole global step of a plan made for a topology (dataidx pack "
                    "--world-size): its packs, tokens, estimated cost (a*L + b*L^2 per sequence) and the step's "
                    "imbalance, its costliest rank over the mean.",
    "token_composition": "One row per dataset and epoch of a mixture drawn under a spec: training entries, "
                         "tokens, supervised tokens and share of tokens.",
    "mixture_positions": "Every position of every mixture with its base entry, runs expanded.",
    "token_files": "One row per render spec whose tokens are stored: its token file, tokens, bytes per token.",
    "skips": "One row per entry a skip list leaves out of a mixture's training orders: who asked, why, and what.",
    "trimmed": "One row per entry the tail of an epoch of a recorded order (dataidx order) leaves out.",
    "order_steps": "One row per entry of each step of a recorded order stored with dataidx order --store-steps.",
    "cut_merges": "Per epoch of a plan made with dataidx pack --merge-cuts: conversations merged, as trees, or kept "
                  "as cuts and why, with the tokens they forward either way.",
    # tables (docs/store.md)
    "datasets": "One row per dataset of the YAML: source, converter, counts and source file fingerprints.",
    "base_entries": "The base index: one (dataset, row, cut) per supervised turn, in source order.",
    "entry_digests": "One row per base entry whose messages or prompt side another entry shares: the 128-bit xxh3 "
                     "of each as hex (prompt NULL where there is none), from the build. Grouped by the views "
                     "exact_duplicates and same_prompts.",
    "builds": "One row per build: when, from which config, by which dataidx, in how long.",
    "mixtures": "One row per mixture: seed, sampling mode, entry count and the config it came from.",
    "mixture_datasets": "One row per dataset of a mixture: its seed, size, weight, and entries requested and drawn.",
    "mixture_runs": "Whole-dataset stretches of a mixture: positions start.. hold entries first_entry..",
    "mixture_entries": "Positions of a mixture that are not in a run, one row each.",
    "mixture_epochs": "One row per epoch of a mixture: its seed and stretch of positions.",
    "mixture_spans": "Ranges of base entries a mixture uses in some epoch (first_entry.., within one dataset); "
                     "the entries between them it never uses.",
    "repeat_counts": "Per mixture and dataset, how many rows the mixture draws each number of times over its "
                     "epochs (a row's times are its most drawn entry's).",
    "repeat_rows": "Per mixture, dataset and times, the first 100 rows drawn that many times: the rows that repeat "
                   "most, without expanding positions.",
    "dataset_turns": "Per dataset, how many rows have each number of entries (supervised turns), counted at "
                     "build time.",
    "epoch_datasets": "One row per dataset and epoch of a mixture: its seed, counts and, under the mixture's "
                      "spec, training entries and tokens.",
    "plan_epochs": "One row per epoch of a packing plan: its seed, packs and fill.",
    "rejected_rows": "Rows a build left out, with dataset, row and reason.",
    "media_files": "One row per distinct media file a build read: place, size, mtime, digest and header fields.",
    "row_media": "One row per media block of a source row, in order: its message, file and path as written.",
    "media_renders": "Per render spec with a processor and media file: its placeholder tokens and grid.",
    "render_specs": "One row per render spec: tokenizer, template, cutoff, truncation and fingerprint.",
    "entry_renders": "One row per base entry and spec: tokens, supervised tokens, status (see entry_lengths).",
    "spec_tokens": "One row per render spec whose tokens are stored (see token_files).",
    "evidence_runs": "One row per list of dataidx dedup or decontaminate: kind, parameters, entries flagged.",
    "duplicate_entries": "One row per base entry a near-duplicate list flags: its representative and Jaccard.",
    "leak_entries": "One row per base entry and eval set a decontamination list flags: item, score and span.",
    "skip_lists": "One row per skip list of a mixture (dataidx skip): who, why, what was asked, entries.",
    "skipped_entries": "One row per base entry of a skip list (see skips).",
    "training_orders": "One row per recorded run order: what it reads, seed, global batch, tail, steps per epoch.",
    "order_trims": "One row per base entry an epoch's tail of a recorded order trims (see trimmed).",
    "order_items": "One row per entry of a step of a recorded order (see order_steps).",
    "render_statuses": "Per render spec, dataset and status, the entries and the longest (full_tokens): "
                       "entry_lengths grouped once, when the spec is written.",
    "render_blocks": "Per render spec and block of 256 base entries (and dataset), the entries that train and "
                     "their tokens: a mixture's runs sum whole blocks.",
    "length_chunks": "Per render spec and 2**20 base entries, their tokens and supervised_tokens as arrays "
                     "(4 bytes an entry, little-endian length << 1 | trains): what pack reads.",
    "render_causes": "Per render spec and cause, the base entries that do not train for it and the first of them.",
    "added_token_uses": "Per spec and dataset, the entries whose data text holds an added token that is not "
                        "special (Qwen's <tool_call>): trained as its id, as LLaMA-Factory v1 does.",
    "packing_plans": "One row per packing plan (see pack_plans).",
    "packs": "One row per pack of a plan: its first member and how many.",
    "packed_entries": "One row per member of every pack, in slot order (joined: trained as one sequence with the "
                      "next, --merge-cuts).",
    "plan_merges": "Per epoch and outcome of a plan made with --merge-cuts, its conversations (see cut_merges).",
    "alembic_version": "The schema revision of the store (dataidx migrate upgrades it).",
}
