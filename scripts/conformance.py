"""Goldens of LLaMA-Factory v1's own Renderer on the real chat templates of model families.

For every family in tests/conformance/families (its template, and a tokenizer built like its
own), v1's ``Renderer.process_samples`` (hiyouga/LLaMA-Factory at ff6d4d12, run from its source)
renders every entry of the hand-written conversations and, when ../shared/data/golden is there,
of LLaMA-Factory's demo data (v1's own converted samples and index). What it makes of each entry
goes to tests/conformance/golden/<family>.jsonl: a digest of ``input_ids``/``labels``/
``loss_weights`` and their lengths, or the error v1 refused it with. tests/test_conformance.py
holds dataidx to them.

    git -C LLaMA-Factory checkout ff6d4d12
    python scripts/conformance.py --llamafactory LLaMA-Factory/src
    python scripts/conformance.py --llamafactory LLaMA-Factory/src --family qwen3 --show 3   # entries side by side
    python scripts/conformance.py --base   # retrain the two base vocabularies (changes every golden)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.conformance import BASE, GOLDEN, KINDS, build_tokenizer, families, train_base  # noqa: E402
from tests.conformance.v1 import entries, outcome, refusal_number, v1_render, v1_renderer_class  # noqa: E402

SHARED_GOLDEN = REPO.parent / "shared" / "data" / "golden"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llamafactory", type=Path, help="LLaMA-Factory's src folder, at commit ff6d4d12")
    parser.add_argument("--family", action="append", help="only these families (default: all)")
    parser.add_argument("--show", type=int, default=0, help="print the first N entries whose golden changed")
    parser.add_argument("--base", action="store_true", help="retrain the base vocabularies first")
    arguments = parser.parse_args()
    if arguments.base:
        for kind in KINDS:
            train_base(kind).save(str(BASE / f"{kind}.json"))
            print(f"wrote {BASE / kind}.json")
    if arguments.llamafactory is None:
        return
    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    renderer_class = v1_renderer_class(arguments.llamafactory.resolve())
    made = entries(SHARED_GOLDEN if SHARED_GOLDEN.is_dir() else None)
    path = GOLDEN / "v1.json"
    golden = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"families": {}}
    if golden.get("keys") != [[name, row, cut] for name, row, cut, _ in made]:
        golden["families"] = {}  # other entries: every family is made again
    # Each family's outcomes with refusals as their text (a refusal is a list, a digest a string).
    old = {slug: [[golden["refusals"][o]] if isinstance(o, int) else o for o in outcomes]
           for slug, outcomes in golden["families"].items()}
    refusals: list[str] = []
    outcomes: dict[str, list[str | int]] = {}
    for family in families():
        slug = family["slug"]
        if arguments.family and slug not in arguments.family and slug in old:  # kept as it was
            outcomes[slug] = [o if isinstance(o, str) else refusal_number(o[0], refusals) for o in old[slug]]
            continue
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            tokenizer = AutoTokenizer.from_pretrained(build_tokenizer(slug, Path(folder) / slug))
            renderer = renderer_class(tokenizer)
            outcomes[slug] = [outcome(v1_render(renderer, sample), refusals) for *_, sample in made]
        now = [[refusals[o]] if isinstance(o, int) else o for o in outcomes[slug]]
        changed = [i for i, o in enumerate(now) if old.get(slug, [None] * len(now))[i] != o]
        refused = sum(isinstance(o, int) for o in outcomes[slug])
        print(f"{slug:22} {len(made):5} entries  {refused:5} refused  {len(changed):5} changed  "
              f"{time.perf_counter() - started:5.1f} s")
        for i in changed[: arguments.show]:
            print("   ", made[i][:3], str(now[i])[:200])
    GOLDEN.mkdir(exist_ok=True)
    path.write_text(json.dumps({
        "made_with": {"llamafactory": "ff6d4d12", "transformers": transformers.__version__,
                      "tokenizers": tokenizers.__version__},
        "keys": [[name, row, cut] for name, row, cut, _ in made], "refusals": refusals, "families": outcomes,
    }, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
