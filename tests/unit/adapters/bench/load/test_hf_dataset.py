"""``--dataset-name hf``: a Hugging Face dataset read from local disk only (``save_to_disk`` folders, a
Hub repository's Parquet/JSON files, one file), each row's prompt with its real lengths.

``data/sharegpt_saved`` was written by the ``datasets`` library itself (5.2.0), which gpuplan does not
need: ``DatasetDict({"train": Dataset.from_list(TRAIN), "test": Dataset.from_list(TEST)}).save_to_disk(...)``
with the rows of :data:`SAVED_TRAIN` and :data:`SAVED_TEST` (and an ``id`` column)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from gpuplan.adapters.bench.load.config import LoadConfig
from gpuplan.adapters.bench.load.hf_dataset import load_hf
from gpuplan.adapters.bench.load.workload import build
from gpuplan.core.errors import FileFormatError, UserInputError

parquet = pytest.importorskip("pyarrow.parquet", reason="the hfdata extra (pyarrow) reads the datasets")
pyarrow = pytest.importorskip("pyarrow")
SAVED = Path(__file__).parent / "data" / "sharegpt_saved"


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection attempt fails the test: the dataset must come from disk alone."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a connection was attempted while loading a local dataset")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _load(path: Path, **kw: Any) -> list[tuple[str, int]]:
    args: dict[str, Any] = {
        "seed": 0,
        "split": None,
        "subset": None,
        "output_len": None,
        "default_output": 99,
    }
    return load_hf(str(path), **(args | kw))


def _turn(who: str, text: str) -> dict[str, str]:
    return {"from": who, "value": text}


SAVED_TRAIN = [
    {"conversations": [_turn("human", "what is two plus two"), _turn("gpt", "four " * 6)]},
    {"conversations": [_turn("human", "hello"), _turn("gpt", "hi there friend")]},
    {"conversations": [_turn("human", "   "), _turn("gpt", "no prompt so skipped")]},
]
SAVED_TEST = [
    {"conversations": [_turn("human", "name three colours please"), _turn("gpt", "red green blue")]}
]


def test_a_saved_sharegpt_dataset_keeps_its_real_lengths() -> None:
    assert sorted(_load(SAVED, split="train")) == [("hello", 3), ("what is two plus two", 6)]
    assert _load(SAVED, split="test") == [("name three colours please", 3)]
    assert sorted(_load(SAVED, split="train", output_len=7)) == [("hello", 7), ("what is two plus two", 7)]
    assert sorted(_load(SAVED / "train")) == sorted(_load(SAVED, split="train"))  # one saved Dataset


def test_a_saved_dataset_dict_needs_its_split_named() -> None:
    with pytest.raises(UserInputError, match=r"has the splits test, train: name one") as err:
        _load(SAVED)
    assert err.value.hint == "e.g. --hf-split test"
    with pytest.raises(UserInputError, match=r"--hf-split 'dev': .* has the splits test, train"):
        _load(SAVED, split="dev")
    with pytest.raises(UserInputError, match=r"holds one dataset, not splits \(drop --hf-split\)"):
        _load(SAVED / "train", split="train")


def test_a_damaged_saved_dataset_is_one_line_naming_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "state.json").write_text('{"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}')
    (folder / "data-00000-of-00001.arrow").write_bytes(b"not arrow")
    with pytest.raises(FileFormatError, match="not an Arrow stream as save_to_disk writes"):
        _load(folder)
    (folder / "state.json").write_text('{"_fingerprint": "x"}')
    with pytest.raises(FileFormatError, match="no _data_files list"):
        _load(folder)


def test_a_hub_repository_layout_reads_its_subset_and_split(tmp_path: Path) -> None:
    main = tmp_path / "gsm8k" / "main"
    main.mkdir(parents=True)
    rows = {
        "train": [{"question": "q " * 5, "answer": "x " * 9}],
        "test": [{"question": "a b", "answer": "c d e"}],
    }
    for split, items in rows.items():
        parquet.write_table(pyarrow.Table.from_pylist(items), main / f"{split}-00000-of-00001.parquet")
    (tmp_path / "gsm8k" / "main" / "dataset_infos.json").write_text('{"main": {}}', encoding="utf-8")
    assert _load(tmp_path / "gsm8k", subset="main", split="test") == [("a b", 3)]
    with pytest.raises(UserInputError, match=r"has the splits test, train: name one"):  # no metadata split
        _load(tmp_path / "gsm8k", subset="main")
    numbered = tmp_path / "converted" / "default" / "train"  # the Hub's parquet conversion: NNNN.parquet
    numbered.mkdir(parents=True)
    parquet.write_table(pyarrow.Table.from_pylist(rows["train"]), numbered / "0000.parquet")
    assert _load(tmp_path / "converted") == [("q " * 5, 9)]  # split "train" from its folder
    with pytest.raises(UserInputError, match=r"--hf-subset 'socratic': no folder"):
        _load(tmp_path / "gsm8k", subset="socratic")


def test_chat_messages_and_mt_bench_turns_in_json_lines(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "name three colours"},
        {"role": "assistant", "content": "red green blue"},
    ]
    chat.write_text(json.dumps({"messages": messages}) + "\n", encoding="utf-8")
    assert _load(chat) == [("name three colours", 3)]
    bench = tmp_path / "mt"
    bench.mkdir()
    (bench / "train.json").write_text(
        json.dumps([{"turns": ["write a poem", "now shorter"]}]), encoding="utf-8"
    )
    assert _load(bench) == [("write a poem", 99)]  # no answer: --output-tokens
    assert _load(bench, output_len=5) == [("write a poem", 5)]  # --hf-output-len, as vLLM's


def test_what_cannot_be_read_locally_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match=r"--dataset-path .*: no such file or folder") as missing:
        _load(tmp_path / "org" / "name")  # a Hub id is not fetched
    assert missing.value.hint is not None and "local disk only" in missing.value.hint
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserInputError, match=r"no save_to_disk dataset and no \.parquet"):
        _load(tmp_path / "empty")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1}\n', encoding="utf-8")
    with pytest.raises(FileFormatError, match="no row with a prompt"):
        _load(rows)
    rows.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(FileFormatError, match="not JSON lines"):
        _load(rows)
    with pytest.raises(UserInputError, match="--hf-split and --hf-subset name parts of a dataset folder"):
        _load(rows, split="train")


def test_the_load_config_takes_hf_with_its_flags_only() -> None:
    base: dict[str, object] = {"url": "http://127.0.0.1:1", "model": "m", "rate_rps": 1.0, "duration_s": 1.0}
    base |= {"input_tokens": 8, "output_tokens": 4}
    config = LoadConfig.model_validate(
        base | {"dataset": "hf", "dataset_path": str(SAVED), "hf_split": "train"}
    )
    plan = build(config)
    assert sorted(plan.request(config, i)[1:] for i in range(2)) == [(1, 3), (5, 6)]  # words in, answer out
    with pytest.raises(ValueError, match="need --dataset-path"):
        LoadConfig.model_validate(base | {"dataset": "hf"})
    with pytest.raises(ValueError, match="go with --dataset-name hf"):
        LoadConfig.model_validate(base | {"hf_split": "train"})
