"""get_model / list_models / aliases / llm-foundry position tables."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from models_testdata import raw_config

from gpuplan.adapters.models import hub, registry
from gpuplan.adapters.models.registry import (
    aliases,
    bundled_ids,
    get_model,
    list_models,
    model_for_seq_len,
    with_position_table,
)
from gpuplan.core.errors import FileFormatError, UnknownNameError, UserInputError
from gpuplan.core.model.arith import param_counts

REAL_HUB_CONFIG = registry._hub_config


@pytest.fixture(autouse=True)
def _no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach the network: the hub lookup finds nothing unless a test says otherwise."""
    monkeypatch.setattr(registry, "_hub_config", lambda _repo: None)


def test_bundled_lookup_is_case_insensitive_and_cached() -> None:
    spec = get_model("META-LLAMA/llama-3.1-8b")
    assert spec.id == "meta-llama/Llama-3.1-8B"
    assert get_model("meta-llama/Llama-3.1-8B") is spec
    assert len(bundled_ids()) == 103


@pytest.mark.parametrize(
    ("alias", "target"),
    [
        ("meta-llama/Llama-2-70b-chat-hf", "meta-llama/Llama-2-70b-hf"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"),
        ("Qwen/Qwen-7B", "Qwen/Qwen-7B-Chat"),
        ("meta-llama/Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-8B"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B"),
        ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B"),
    ],
)
def test_aliases(alias: str, target: str) -> None:
    assert get_model(alias).id == target


def test_every_alias_points_to_a_bundled_id() -> None:
    ids = set(bundled_ids())
    assert set(aliases().values()) <= ids
    assert not set(aliases()) & ids


def test_unknown_name_suggests_and_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the Hub extra the hint names it (``huggingface_hub`` blocked: the ``engine`` extra's
    transformers installs it, so the test must not depend on whether it is there)."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import huggingface_hub -> ImportError
    with pytest.raises(UnknownNameError) as info:
        get_model("meta-llama/Llama-3.1-8C")
    assert "meta-llama/Llama-3.1-8B" in info.value.suggestions
    assert "gpuplan[hf]" in str(info.value)


def test_config_path_and_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(raw_config("mistralai/Mistral-7B-v0.1")))
    by_dir = get_model(str(tmp_path))
    by_file = get_model(str(tmp_path / "config.json"))
    assert param_counts(by_dir).total == param_counts(by_file).total == 7_241_732_096


def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match=r"no config\.json"):
        get_model(str(tmp_path))
    with pytest.raises(UserInputError, match="no such file"):
        get_model(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FileFormatError, match="not valid JSON"):
        get_model(str(bad))
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(FileFormatError, match="missing 'hidden_size'"):
        get_model(str(broken))


def test_hub_config_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    config: dict[str, Any] = raw_config("meta-llama/Llama-3.1-8B")
    found = {"someone/llama-copy": config}
    monkeypatch.setattr(registry, "_hub_config", found.get)
    spec = get_model("someone/llama-copy")
    assert spec.id == "someone/llama-copy"
    assert param_counts(spec).total == 8_030_261_248


def test_hub_lookup_without_huggingface_hub_returns_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()
    import builtins

    real_import = builtins.__import__

    def no_hub(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("huggingface_hub"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_hub)
    assert registry._hub_config("org/unknown-model") is None
    assert registry._hub_config("not a repo id") is None


def test_list_models() -> None:
    rows = list_models()
    assert len(rows) == 103
    by_id = {r.id: r for r in rows}
    llama = by_id["meta-llama/Llama-3.1-8B"]
    assert llama.kv_bytes_per_token_bf16 == 131_072
    assert llama.params_b == pytest.approx(8.03, abs=0.01)
    mixtral = by_id["mistralai/Mixtral-8x7B-v0.1"]
    assert mixtral.active_params_b == pytest.approx(12.88, abs=0.01)
    assert by_id["bert-large-uncased"].kv_bytes_per_token_bf16 == 0


def test_llmfoundry_position_table_follows_seq_len() -> None:
    spec = get_model("mosaicml/mpt-1b-llmfoundry")
    assert param_counts(spec).total / 1e9 == pytest.approx(1.316, abs=0.0005)
    long = model_for_seq_len(spec, 65536)
    assert long.learned_position_embeddings == 65536
    assert param_counts(long).total / 1e9 == pytest.approx(1.446, abs=0.0005)
    assert long.params_reported is None
    assert model_for_seq_len(spec, 2048) is spec


def test_other_models_ignore_seq_len() -> None:
    opt = get_model("facebook/opt-13b")
    assert model_for_seq_len(opt, 8192) is opt
    llama = get_model("meta-llama/Llama-3.1-8B")
    assert model_for_seq_len(llama, 4096) is llama


def test_with_position_table_validates() -> None:
    spec = get_model("mosaicml/mpt-125m-llmfoundry")
    with pytest.raises(UserInputError):
        with_position_table(spec, 0)
    assert with_position_table(spec, 4096).max_position_embeddings == 4096


def _fake_hub(monkeypatch: pytest.MonkeyPatch, download: Any) -> None:
    """huggingface_hub replaced by ``download``; the Hub's existence check answers 200."""
    module = types.ModuleType("huggingface_hub")
    module.hf_hub_download = download  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    monkeypatch.setattr(registry, "_hub_config", REAL_HUB_CONFIG)
    monkeypatch.setattr(hub, "probe_status", lambda _repo_id, _token: 200)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def test_hub_failures_become_unknown_name(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []

    def failing(repo_id: str, filename: str, *, local_files_only: bool) -> str:
        calls.append(local_files_only)
        raise RuntimeError("401 gated repo")

    _fake_hub(monkeypatch, failing)
    with pytest.raises(UnknownNameError) as info:
        get_model("someone/private-model")
    assert calls == [True, False]  # local cache first, then the Hub
    assert "huggingface.co" in str(info.value) and "pip install" not in str(info.value)  # it is installed


def test_a_bundled_model_answers_to_its_name_without_the_organisation() -> None:
    assert get_model("llama-3.1-8b").id == "meta-llama/Llama-3.1-8B"
    assert get_model("Qwen2.5-7B-Instruct").id == "Qwen/Qwen2.5-7B-Instruct"


def test_hub_download_is_parsed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw_config("Qwen/Qwen2.5-7B-Instruct")))
    _fake_hub(monkeypatch, lambda repo_id, filename, *, local_files_only: str(path))
    spec = get_model("someone/qwen-copy")
    assert spec.id == "someone/qwen-copy"
    assert param_counts(spec).total == 7_615_616_512
