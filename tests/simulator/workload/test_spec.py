"""Model specs: built-ins load with the published parameter counts; bad files are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.errors import ConfigError
from lumos.simulator.workload.spec import Mlp, builtin_models, load_model

# published totals (billions): GPT-3 paper Table 2.1, Llama model cards, Nemotron-4 papers
PUBLISHED_B = {
    "gpt3-175b": 175.0,
    "llama2-7b": 6.74,
    "llama2-70b": 69.0,
    "llama3-8b": 8.03,
    "llama3.1-70b": 70.6,
    "llama3.1-405b": 405.9,
    "nemotron4-15b": 15.7,
    "nemotron4-340b": 341.0,
    "mistral-7b": 7.24,
    "nemo-gpt3-5b": 5.0,  # NeMo recipe names (5B, 20B)
    "nemo-gpt3-20b": 20.0,
}


@pytest.mark.parametrize("name", builtin_models())
def test_every_builtin_loads(name: str) -> None:
    spec = load_model(name)
    assert spec.name == name and spec.hidden % spec.heads == 0
    assert spec.heads % spec.kv_heads == 0


@pytest.mark.parametrize(("name", "billions"), sorted(PUBLISHED_B.items()))
def test_parameter_counts_match_published(name: str, billions: float) -> None:
    assert load_model(name).params() / 1e9 == pytest.approx(billions, rel=0.02)


def test_llama_is_gqa_swiglu_untied() -> None:
    spec = load_model("llama3.1-405b")
    assert (spec.kv_heads, spec.mlp, spec.tied_embeddings) == (8, Mlp.SWIGLU, False)


def test_unknown_key_says_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("layers: 2\nhiden: 64\nheads: 4\nvocab: 100\n")
    with pytest.raises(ConfigError, match=r"m.yaml: unknown key 'hiden'; did you mean 'hidden'"):
        load_model(path)


def test_user_file_defaults(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text("layers: 2\nhidden: 64\nheads: 4\nvocab: 100\n")
    spec = load_model(path)
    assert (spec.name, spec.kv_heads, spec.ffn) == ("tiny", 4, 256)


def test_unknown_model_lists_builtins() -> None:
    with pytest.raises(ConfigError, match=r"unknown model 'gpt5'.*gpt3-175b"):
        load_model("gpt5")
