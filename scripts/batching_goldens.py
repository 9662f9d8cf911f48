"""Record what LLaMA-Factory v1's dynamic batchers cut from generated length streams, for
tests/test_batching_strategies.py where v1's source is not at hand:

    DATAIDX_LLAMAFACTORY=/path/to/LLaMA-Factory/src python scripts/batching_goldens.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from tests.batching_cases import CASES, case_lengths  # noqa: E402
from tests.conformance.v1_batching import v1_steps  # noqa: E402


def main() -> None:
    source = Path(os.environ["DATAIDX_LLAMAFACTORY"])
    found = [{**case, "steps": v1_steps(source, case["strategy"], case_lengths(case), cutoff=case["cutoff"],
                                        micro_batch_size=case["micro_batch_size"],
                                        num_micro_batch=case["num_micro_batch"])} for case in CASES]
    target = REPO / "tests" / "conformance" / "golden" / "batching.json"
    target.write_text(json.dumps(found, separators=(",", ":")) + "\n")
    print(f"wrote {target}: {len(found)} cases, {sum(len(case['steps']) for case in found)} steps")


if __name__ == "__main__":
    main()
