"""A Hugging Face dataset on local disk as prompts with their real lengths (``--dataset-name hf
--dataset-path DIR``, ``vllm bench serve``'s names; its ``--hf-split``, ``--hf-subset``,
``--hf-output-len``). Nothing is fetched: ``DIR`` is read as it is on disk.

Where the rows come from (read with pyarrow, the ``hfdata`` extra: ``pip install 'gpuplan[hfdata]'``; the
``datasets`` library itself is not needed, nor imported, and it would bring ``huggingface_hub``):

- a ``save_to_disk`` folder: ``state.json`` naming its Arrow stream files (``data-00000-of-00001.arrow``),
  or ``dataset_dict.json`` listing its splits, one such folder each; that is the format
  ``datasets.Dataset.save_to_disk`` writes and ``load_from_disk`` reads;
- a folder of data files, as a dataset repository downloaded from the Hub holds them
  (``data/train-00000-of-00001.parquet``, ``test.jsonl``, ``default/train/0000.parquet``): ``*.parquet``
  (pyarrow), ``*.jsonl`` and ``*.json`` (JSON lines, or one JSON list of rows). A file's split is its name
  up to the first ``-`` (``train-00000-of-00001`` → ``train``), or its folder's name when that part is a
  number. ``--hf-subset NAME`` reads the folder ``DIR/NAME`` (a Hub repository keeps each config there);
- one such data file as ``--dataset-path``.

``--hf-split`` picks the split; without it a dataset of one split uses it, and one of several is refused
with their names. What a row gives, by its columns (the first that fits):

- ``conversations`` (ShareGPT: ``[{"from": ..., "value": ...}, ...]``): the first turn is the prompt, the
  second turn's length the output length;
- ``messages`` (OpenAI chat: ``[{"role": ..., "content": ...}, ...]``): the first ``user`` message is the
  prompt, the length of the ``assistant`` message after it the output length;
- ``turns`` (MT-Bench: a list of strings): the first turn is the prompt;
- a text column, the first of :data:`PROMPT_COLUMNS` (GuideLLM's preferred columns, in its order), with
  the length of the first of :data:`ANSWER_COLUMNS` as the output length.

The output length is ``--hf-output-len`` when given (vLLM's override), else the answer's, else
``--output-tokens``. Lengths are words (one word = one token, docs/bench.md). Rows without a prompt are
skipped; the rest are shuffled with ``--seed`` (vLLM shuffles its HF datasets with its seed too).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpuplan.adapters.bench.tokens import estimate_tokens
from gpuplan.core import jsontext
from gpuplan.core.errors import FileFormatError, UserInputError

PROMPT_COLUMNS = (
    "prompt",
    "instruction",
    "input",
    "inputs",
    "question",
    "context",
    "text",
    "content",
    "body",
)
"""GuideLLM's ``preferred_data_columns`` (``src/guidellm/settings.py``, https://github.com/vllm-project/guidellm),
in its order, less ``data`` (too generic to be a prompt)."""
ANSWER_COLUMNS = ("completion", "response", "output", "answer", "chosen", "target")
"""Columns holding a reference answer, whose length is the request's output length."""
DATA_SUFFIXES = (".parquet", ".jsonl", ".json")
METADATA_FILES = frozenset({"dataset_info.json", "dataset_infos.json", "dataset_dict.json", "state.json"})
"""JSON files of a dataset folder that describe it rather than hold rows."""
INSTALL_HINT = (
    "from the clone: .venv/bin/pip install -e '.[hfdata]' (pyarrow reads a dataset's Arrow/Parquet files)"
)
LOCAL_ONLY_HINT = (
    "gpuplan reads Hugging Face datasets from local disk only: save one with Dataset.save_to_disk(DIR), or "
    "download the dataset repository (huggingface-cli download --repo-type dataset ID --local-dir DIR)"
)


def _pyarrow() -> Any:
    """pyarrow with its ``ipc`` and ``parquet`` modules; missing: one line naming the extra."""
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise UserInputError("--dataset-name hf needs pyarrow", hint=INSTALL_HINT) from None
    return pyarrow


def _split_of(path: Path) -> str:
    name = path.name.split(".")[0].split("-")[0]
    return path.parent.name if name.isdigit() else name


def _data_files(root: Path) -> dict[str, list[Path]]:
    """The data files under ``root`` by split (hidden folders such as ``.cache`` left out)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*")):
        hidden = any(part.startswith(".") for part in path.relative_to(root).parts)
        if path.is_file() and path.suffix in DATA_SUFFIXES and not hidden and path.name not in METADATA_FILES:
            found.setdefault(_split_of(path), []).append(path)
    return found


def _pick(splits: Iterable[str], split: str | None, where: str) -> str:
    names = sorted(splits)
    if split is not None and split not in names:
        raise UserInputError(f"--hf-split {split!r}: {where} has the splits {', '.join(names)}")
    if split is None and len(names) > 1:
        raise UserInputError(
            f"{where} has the splits {', '.join(names)}: name one", hint=f"e.g. --hf-split {names[0]}"
        )
    return split or names[0]


def _file_rows(path: Path) -> list[Any]:
    if path.suffix == ".parquet":
        try:
            rows: list[Any] = _pyarrow().parquet.read_table(path).to_pylist()
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise FileFormatError(f"{path}: not a readable Parquet file ({exc})") from None
        return rows
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:  # UTF-16 exports, binary files
        raise FileFormatError(f"{path}: not a UTF-8 text file ({exc})") from None
    try:
        whole = jsontext.loads(text) if path.suffix == ".json" and text.lstrip().startswith("[") else None
        return (
            whole
            if isinstance(whole, list)
            else [jsontext.loads(ln) for ln in text.splitlines() if ln.strip()]
        )
    except ValueError as exc:
        raise FileFormatError(f"{path}: not JSON lines or a JSON list of rows ({exc})") from None


def _json_file(path: Path) -> dict[str, Any]:
    """A JSON object file of a ``save_to_disk`` folder."""
    try:
        value = jsontext.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FileFormatError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(value, dict):
        raise FileFormatError(f"{path}: expected a JSON object, as save_to_disk writes")
    return value


def _arrow_rows(path: Path) -> list[Any]:
    """The rows of one ``save_to_disk`` shard (an Arrow IPC stream)."""
    arrow = _pyarrow()
    try:
        with arrow.memory_map(str(path)) as source:
            rows: list[Any] = arrow.ipc.open_stream(source).read_all().to_pylist()
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise FileFormatError(f"{path}: not an Arrow stream as save_to_disk writes ({exc})") from None
    return rows


def _disk_rows(root: Path, split: str | None) -> list[Any]:
    """The rows of a ``save_to_disk`` folder: one dataset (``state.json``) or its splits
    (``dataset_dict.json``, a folder per split)."""
    if (root / "dataset_dict.json").is_file():
        splits = _json_file(root / "dataset_dict.json").get("splits") or []
        return _disk_rows(root / _pick(splits, split, str(root)), None)
    if split is not None:
        raise UserInputError(f"--hf-split {split!r}: {root} holds one dataset, not splits (drop --hf-split)")
    state = _json_file(root / "state.json")
    listed = state.get("_data_files")
    files = (
        [item.get("filename") for item in listed if isinstance(item, dict)]
        if isinstance(listed, list)
        else []
    )
    names = [name for name in files if isinstance(name, str)]
    if not names or len(names) != len(files):
        raise FileFormatError(f"{root / 'state.json'}: no _data_files list, as save_to_disk writes")
    return [row for name in names for row in _arrow_rows(root / name)]


def _rows(path: str, split: str | None, subset: str | None) -> list[Any]:
    root = Path(path).expanduser() / (subset or "")
    if not root.exists():
        what = (
            f"--hf-subset {subset!r}: no folder {root}"
            if subset
            else f"--dataset-path {path}: no such file or folder"
        )
        raise UserInputError(what, hint=LOCAL_ONLY_HINT)
    if root.is_file():
        if split is not None or root.suffix not in DATA_SUFFIXES:
            raise UserInputError(
                f"--dataset-path {path}: a file is one split of rows ({', '.join(DATA_SUFFIXES)}); "
                "--hf-split and --hf-subset name parts of a dataset folder"
            )
        return _file_rows(root)
    if (root / "state.json").is_file() or (root / "dataset_dict.json").is_file():
        return _disk_rows(root, split)
    files = _data_files(root)
    if not files:
        raise UserInputError(
            f"--dataset-path {root}: no save_to_disk dataset and no {', '.join(DATA_SUFFIXES)} file in it",
            hint=LOCAL_ONLY_HINT,
        )
    return [row for file in files[_pick(files, split, str(root))] for row in _file_rows(file)]


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def chat_turns(turns: object, key: str, text_key: str) -> tuple[str, str]:
    """(first turn, second turn) of a ShareGPT (``from``/``value``) or chat (``role``/``content``) list;
    a chat's prompt is its first user message and the answer the message after it."""
    items = [t for t in turns if isinstance(t, Mapping)] if isinstance(turns, list) else []
    start = next((i for i, t in enumerate(items) if t.get(key) == "user"), 0) if key == "role" else 0
    pair = [_text(t.get(text_key)) for t in items[start : start + 2]] + ["", ""]
    return pair[0], pair[1]


def _prompt_and_answer(row: Mapping[str, Any]) -> tuple[str, str]:
    if "conversations" in row:
        return chat_turns(row["conversations"], "from", "value")
    if "messages" in row:
        return chat_turns(row["messages"], "role", "content")
    if "turns" in row:
        turns = row["turns"]
        return (_text(turns[0]) if isinstance(turns, list) and turns else ""), ""
    prompt = next((_text(row[c]) for c in PROMPT_COLUMNS if c in row), "")
    return prompt, next((_text(row[c]) for c in ANSWER_COLUMNS if c in row), "")


def load_hf(
    path: str,
    *,
    seed: int,
    split: str | None,
    subset: str | None,
    output_len: int | None,
    default_output: int,
) -> list[tuple[str, int]]:
    """(prompt, output tokens) of each row of a local Hugging Face dataset, with their real lengths (see
    the module doc), shuffled."""
    prompts: list[tuple[str, int]] = []
    for row in _rows(path, split, subset):
        prompt, answer = _prompt_and_answer(row) if isinstance(row, Mapping) else ("", "")
        if prompt.strip():  # the answer is counted only when --hf-output-len does not override it
            prompts.append((prompt, output_len or estimate_tokens(answer) or default_output))
    if not prompts:
        raise FileFormatError(
            f"{path}: no row with a prompt",
            hint="a row needs conversations, messages, turns or one of the columns "
            + ", ".join(PROMPT_COLUMNS),
        )
    random.Random(seed).shuffle(prompts)
    return prompts
