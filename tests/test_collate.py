"""The Collator against a plain per-row reference: it writes every field of a batch through one
mask (one conversion a batch), so any drawn batch must come out as the row-by-row layout would."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from dataidx import Collator
from dataidx.errors import UsageError
from dataidx.render import IGNORE

PAD = 7


@st.composite
def _samples(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(0, 12))
    ids = draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n))
    labels = [i if draw(st.booleans()) else IGNORE for i in ids]
    weights = draw(st.lists(st.sampled_from([0.0, 1.0, 0.5, 1e-9, 3.3]), min_size=n, max_size=n))
    return {"input_ids": ids, "labels": labels, "loss_weights": weights}


def _padded_reference(samples: list[dict[str, Any]]) -> dict[str, list]:
    width = max((len(s["input_ids"]) for s in samples), default=0)
    rows: dict[str, list] = {key: [] for key in ("input_ids", "labels", "loss_weights", "position_ids",
                                                 "attention_mask")}
    for s in samples:
        pad = width - len(s["input_ids"])
        rows["input_ids"].append(s["input_ids"] + [PAD] * pad)
        rows["labels"].append(s["labels"] + [IGNORE] * pad)
        rows["loss_weights"].append(s["loss_weights"] + [0.0] * pad)
        rows["position_ids"].append(list(range(len(s["input_ids"]))) + [0] * pad)
        rows["attention_mask"].append([1] * len(s["input_ids"]) + [0] * pad)
    return rows


def _packed_reference(packs: list[list[dict[str, Any]]]) -> dict[str, Any]:
    rows: list[dict[str, list]] = []
    for pack in packs:
        row: dict[str, list] = {"input_ids": [], "labels": [], "loss_weights": [], "position_ids": [], "sample_ids": []}
        for number, s in enumerate(pack, start=1):
            labels, weights = list(s["labels"]), list(s["loss_weights"])
            if number > 1 and labels:  # predicted from the sample before: trains on nothing
                labels[0], weights[0] = IGNORE, 0.0
            row["input_ids"] += s["input_ids"]
            row["labels"] += labels
            row["loss_weights"] += weights
            row["position_ids"] += range(len(s["input_ids"]))
            row["sample_ids"] += [number] * len(s["input_ids"])
        rows.append(row)
    width = max((len(row["input_ids"]) for row in rows), default=0)
    fills = {"input_ids": PAD, "labels": IGNORE, "loss_weights": 0.0, "position_ids": 0, "sample_ids": 0}
    out: dict[str, Any] = {key: [row[key] + [fill] * (width - len(row[key])) for row in rows]
                           for key, fill in fills.items()}
    out["attention_mask"] = [[int(owner > 0) for owner in row] for row in out["sample_ids"]]
    segments: list[int] = []
    for pack in packs:
        lengths = [len(s["input_ids"]) for s in pack]
        segments += [n for n in lengths if n]
        if width - sum(lengths):
            segments.append(width - sum(lengths))
    out["cu_seq_lens"] = [sum(segments[:k]) for k in range(len(segments) + 1)]
    out["max_length"] = max(segments, default=0)
    return out


def _as_lists(batch: dict[str, Any]) -> dict[str, Any]:
    dtypes = {"loss_weights": torch.float32, "cu_seq_lens": torch.int32}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            assert value.dtype == dtypes.get(key, torch.long), key
    return {key: value.tolist() if isinstance(value, torch.Tensor) else value for key, value in batch.items()}


def _float32(rows: list[list[float]]) -> list[list[float]]:
    return torch.tensor(rows, dtype=torch.float32).tolist() if rows and rows[0] else rows


@given(st.lists(_samples(), max_size=6))
def test_a_padded_batch_is_the_rows_padded_one_by_one(samples: list[dict[str, Any]]) -> None:
    batch = _as_lists(Collator(pad_token_id=PAD)(samples))
    reference = _padded_reference(samples)
    reference["loss_weights"] = _float32(reference["loss_weights"])
    assert list(batch) == list(reference) and batch == reference


@given(st.lists(st.lists(_samples(), min_size=1, max_size=4), min_size=1, max_size=4))
def test_a_packed_batch_is_the_packs_laid_out_one_by_one(packs: list[list[dict[str, Any]]]) -> None:
    batch = _as_lists(Collator(pad_token_id=PAD)(packs))
    reference = _packed_reference(packs)
    reference["loss_weights"] = _float32(reference["loss_weights"])
    assert list(batch) == ["input_ids", "labels", "loss_weights", "position_ids", "sample_ids", "attention_mask",
                           "cu_seq_lens", "max_length"]
    assert batch == reference


def test_a_sample_whose_fields_disagree_in_length_is_named() -> None:
    good = {"input_ids": [1, 2], "labels": [1, 2], "loss_weights": [1.0, 1.0]}
    bad = {"input_ids": [1, 2, 3], "labels": [1, 2], "loss_weights": [1.0, 1.0, 1.0]}
    with pytest.raises(UsageError, match="sample 1 of the batch has 3 input_ids, 2 labels and 3 loss_weights"):
        Collator(pad_token_id=0)([good, bad])
    with pytest.raises(UsageError, match="sample 1 of the batch has 3 input_ids"):
        Collator(pad_token_id=0)([[good, bad]])


def test_a_batch_whose_weights_a_models_own_loss_would_drop_says_so_once(monkeypatch: pytest.MonkeyPatch,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A loss that reads labels only trains a token weighted 0.5 at 1: the first such batch of a
    process says so (once it went in silence), unless the Collator is told the loss reads them."""
    import logging

    from dataidx import WeightedLoss

    monkeypatch.setattr("dataidx.training.collate._said_unweighted", False)
    whole = {"input_ids": [1, 2, 3], "labels": [IGNORE, 2, 3], "loss_weights": [0.0, 1.0, 1.0]}
    half = {"input_ids": [4, 5, 6], "labels": [IGNORE, 5, 6], "loss_weights": [0.0, 0.5, 0.5]}
    with caplog.at_level(logging.WARNING, logger="dataidx.training.collate"):
        Collator(pad_token_id=PAD)([whole, whole])  # weights of 1 train the same either way
        Collator(pad_token_id=PAD, weighted=True)([half])
        assert caplog.text == ""
        Collator(pad_token_id=PAD)([whole, half])
        Collator(pad_token_id=PAD).packed([[whole, half]])
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "weigh 2 of its supervised tokens other than 1 (0.5, ...)" in said[0]
    assert "trains them at 1" in said[0] and "dataidx.WeightedLoss" in said[0]

    class Base:  # what WeightedLoss mixes into: a Trainer that keeps its data_collator
        def __init__(self, data_collator: Any) -> None:
            self.data_collator = data_collator

    class Mixed(WeightedLoss, Base):
        pass

    mine = Collator(pad_token_id=PAD)
    trainer = Mixed(data_collator=mine)
    assert trainer.data_collator.weighted and not mine.weighted  # the caller's own collator is left as it was


def _concatenated_reference(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """LLaMA-Factory v1's pair layout (``Renderer.process_samples``, ff6d4d12) padded row by row:
    chosen then rejected, token types 1 and 2, positions from 0 on each side; the rejected side's
    first label unlabelled, as a pack's second sample's."""
    out = _packed_reference([[pair["chosen"], pair["rejected"]] for pair in pairs])
    out["token_type_ids"] = out["sample_ids"]
    return out


@given(st.lists(st.fixed_dictionaries({"chosen": _samples(), "rejected": _samples()}), min_size=1, max_size=5))
def test_concatenated_pairs_are_one_row_each_chosen_then_rejected(pairs: list[dict[str, Any]]) -> None:
    batch = _as_lists(Collator(pad_token_id=PAD, pairs="concatenated")(pairs))
    reference = _concatenated_reference(pairs)
    reference["loss_weights"] = _float32(reference["loss_weights"])
    assert list(batch) == ["input_ids", "labels", "loss_weights", "position_ids", "sample_ids", "attention_mask",
                           "cu_seq_lens", "max_length", "token_type_ids"]
    assert batch == reference


def test_pairs_stay_stacked_by_default() -> None:
    chosen = {"input_ids": [1, 2, 3], "labels": [IGNORE, 2, 3], "loss_weights": [0.0, 1.0, 1.0]}
    rejected = {"input_ids": [1, 4], "labels": [IGNORE, 4], "loss_weights": [0.0, 1.0]}
    pair = {"chosen": chosen, "rejected": rejected}
    stacked = Collator(pad_token_id=PAD)([pair, pair])
    assert stacked["input_ids"].tolist() == [[1, 2, 3], [1, 2, 3], [1, 4, PAD], [1, 4, PAD]]
    assert "token_type_ids" not in stacked
    concatenated = Collator(pad_token_id=PAD, pairs="concatenated")([pair, pair])
    assert concatenated["input_ids"].tolist() == [[1, 2, 3, 1, 4]] * 2
    assert concatenated["token_type_ids"].tolist() == [[1, 1, 1, 2, 2]] * 2
    assert concatenated["position_ids"].tolist() == [[0, 1, 2, 0, 1]] * 2


def test_concatenated_pairs_reach_the_model_as_two_sequences() -> None:
    """The model gets ids, positions and a mask in which no rejected token sees a chosen one;
    ``token_type_ids`` stay with the loss (v1's DPO trainer passes the model no more)."""
    from dataidx import model_inputs

    chosen = {"input_ids": [1, 2], "labels": [IGNORE, 2], "loss_weights": [0.0, 1.0]}
    rejected = {"input_ids": [1, 3, 4], "labels": [IGNORE, 3, 4], "loss_weights": [0.0, 1.0, 1.0]}
    batch = Collator(pad_token_id=PAD, pairs="concatenated")([{"chosen": chosen, "rejected": rejected}])
    inputs = model_inputs(batch)
    assert sorted(inputs) == ["attention_mask", "input_ids", "position_ids"]
    mask = inputs["attention_mask"][0, 0]
    assert not mask[2:, :2].any() and mask[2:, 2:].tolist() == torch.ones(3, 3, dtype=torch.bool).tril().tolist()


def test_an_unknown_pair_layout_is_one_error_naming_the_choices() -> None:
    with pytest.raises(UsageError, match=r"pairs must be one of 'stacked', 'concatenated', got 'concat'"):
        Collator(pad_token_id=0, pairs="concat")


@pytest.mark.parametrize("pairs", ["stacked", "concatenated"])
def test_a_batch_mixing_pairs_and_single_sequences_is_refused(pairs: str) -> None:
    single = {"input_ids": [1, 2], "labels": [IGNORE, 2], "loss_weights": [0.0, 1.0]}
    pair = {"chosen": single, "rejected": single}
    for batch in ([pair, single], [single, pair]):
        with pytest.raises(UsageError, match=r"mixes preference pairs \(chosen/rejected\) and single sequences \(1 of"):
            Collator(pad_token_id=0, pairs=pairs)(batch)
