"""Generated data for the scale benchmark: millions of rows in seconds, deterministic.

``scripts/bench.py``'s generator draws every word with ``random.choice``: fine at a million rows,
minutes at ten million. Here a few thousand phrases are made once and every row picks its
phrases with NumPy, so 10M alpaca rows take well under a minute to write. The shape is
``bench.py``'s: alpaca rows (one entry each) and sharegpt conversations of 1 to 6 exchanges
(3.5 entries on average), four alpaca rows to one conversation, about 1.875 entries per alpaca
row.

    python scripts/scale_data.py --entries 20000000 -o /tmp/scale20m   # writes bench.yaml there
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import yaml

#: Entries per alpaca row with a quarter as many conversations of 3.5 supervised turns each.
ENTRIES_PER_ALPACA_ROW = 1 + 3.5 / 4
#: Rows generated and written at a time.
_ROWS_PER_WRITE = 100_000


def _phrases(count: int, words: tuple[int, int], seed: int) -> list[str]:
    """``count`` JSON-encoded phrases of ``words[0]``..``words[1]`` words."""
    rng = random.Random(seed)
    vocabulary = ("the of and a to in is you that it he was for on are as with his they at be this have from "
                  "model data train token batch loss step turn").split()
    return [json.dumps(" ".join(rng.choice(vocabulary) for _ in range(rng.randint(*words)))) for _ in range(count)]


def generate(folder: Path, entries: int) -> Path:
    """Alpaca and sharegpt JSONL files for about ``entries`` entries, and their v1 YAML."""
    folder.mkdir(parents=True, exist_ok=True)
    alpaca_rows = round(entries / ENTRIES_PER_ALPACA_ROW)
    conversations = alpaca_rows // 4
    rng = np.random.default_rng(0)
    short, long = _phrases(4096, (3, 8), 1), _phrases(4096, (8, 16), 2)
    with (folder / "alpaca.jsonl").open("w") as out:
        for start in range(0, alpaca_rows, _ROWS_PER_WRITE):
            n = min(_ROWS_PER_WRITE, alpaca_rows - start)
            picks = rng.integers(0, 4096, size=(3, n)).tolist()
            has_input = (rng.random(n) < 0.5).tolist()
            out.write("".join(
                f'{{"instruction": {short[i]}, "input": {short[j] if has else chr(34) * 2}, "output": {long[o]}}}\n'
                for i, j, o, has in zip(*picks, has_input)
            ))
    with (folder / "sharegpt.jsonl").open("w") as out:
        for start in range(0, conversations, _ROWS_PER_WRITE):
            n = min(_ROWS_PER_WRITE, conversations - start)
            exchanges = rng.integers(1, 7, size=n).tolist()
            picks = iter(rng.integers(0, 4096, size=2 * sum(exchanges)).tolist())
            lines = []
            for count in exchanges:
                turns = ", ".join(f'{{"from": "human", "value": {short[next(picks)]}}}, '
                                  f'{{"from": "gpt", "value": {long[next(picks)]}}}' for _ in range(count))
                lines.append(f'{{"conversations": [{turns}]}}\n')
            out.write("".join(lines))
    return write_config(folder)


def write_config(folder: Path) -> Path:
    """The v1 YAML of ``alpaca.jsonl`` and ``sharegpt.jsonl`` in ``folder`` (shared with scripts/bench.py)."""
    config = folder / "bench.yaml"
    config.write_text(yaml.safe_dump({
        "alpaca": {"path": str(folder / "alpaca.jsonl"), "source": "local", "converter": "alpaca"},
        "sharegpt": {"path": str(folder / "sharegpt.jsonl"), "source": "local", "converter": "sharegpt"},
    }, sort_keys=False))
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, required=True)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    print(generate(args.output, args.entries))


if __name__ == "__main__":
    main()
