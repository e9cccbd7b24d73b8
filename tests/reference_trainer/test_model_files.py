"""A crafted model directory cannot hang or crash `eval`: each bad file is one line naming it
(reference_trainer/model_files.py and the loaders of reference_trainer/policy.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from reference_trainer import model_files
from reference_trainer.model_files import ModelFileError
from reference_trainer.policy import load_policy, load_tokenizer, safe_torch_load, save_policy
from support import trainer_envs

ROOT = Path(__file__).resolve().parents[2]
HANG = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return Path(trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.fixture
def copy(tiny_dir, tmp_path):
    target = tmp_path / "model"
    shutil.copytree(tiny_dir, target)
    return target


def test_a_template_that_renders_forever_is_refused_within_the_bound_naming_its_file(copy, monkeypatch):
    monkeypatch.setattr(model_files, "TEMPLATE_SECONDS", 0.5)
    (copy / "chat_template.jinja").write_text(HANG, encoding="utf-8")
    with pytest.raises(
        ModelFileError, match=r"chat_template\.jinja: its chat template did not render .* within 0\.5 s"
    ):
        load_tokenizer(copy)
    # the render was stopped, not left running: a loop like this one fills memory until the process dies
    assert not any(t.name == "chat-template-check" for t in threading.enumerate())


def test_a_template_that_raises_is_refused_naming_its_file(copy):
    (copy / "chat_template.jinja").write_text("{{ raise_exception('no') }}", encoding="utf-8")
    with pytest.raises(ModelFileError, match=r"chat_template\.jinja: its chat template fails"):
        load_tokenizer(copy)


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "tokenizer_config.json"])
def test_json_nested_past_the_recursion_limit_is_one_error_naming_the_file(copy, name):
    (copy / name).write_text("[" * 100_000, encoding="utf-8")
    with pytest.raises(ModelFileError, match=rf"{name}: JSON nested too deeply"):
        load_policy(copy)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


@pytest.mark.parametrize("where", ["", "critic"])
def test_a_pickled_weights_file_of_python_objects_is_refused_naming_it(tiny_dir, tmp_path, where):
    policy, tokenizer = load_policy(tiny_dir, critic="separate" if where else "shared")
    target = save_policy(policy, tokenizer, tmp_path / "policy")
    folder = target / where if where else target
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "marker"
    torch.save({"weights": _RunsCode(marker)}, folder / "pytorch_model.bin")
    with pytest.raises(ModelFileError, match=rf"{where}/?pytorch_model\.bin: refused to load"):
        load_policy(target)
    assert not marker.exists()


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_tensor_file_linked_to_a_device_is_refused_as_not_a_regular_file(tmp_path):
    link = tmp_path / "state.pt"
    link.symlink_to("/dev/zero")
    with pytest.raises(ModelFileError, match="not a regular file"):
        safe_torch_load(link)


def test_eval_on_a_crafted_directory_is_one_line_and_exit_2(copy):
    (copy / "config.json").write_text("[" * 100_000, encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "reference_trainer",
            "eval",
            "--model",
            str(copy),
            "--env",
            trainer_envs.ENV_ID,
            "--import",
            "support.trainer_envs",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.strip().count("\n") == 0 and "config.json: JSON nested too deeply" in run.stderr
