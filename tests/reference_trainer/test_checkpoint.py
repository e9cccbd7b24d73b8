"""Checkpoints: a kill at any moment of a save leaves a whole checkpoint; loading never runs code."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from support.paths import ROOT, TESTS
from support import trainer_envs
from reference_trainer import checkpoint
from reference_trainer.config import preset
from reference_trainer.policy import load_policy
from reference_trainer.trainer import Trainer


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return str(trainer_envs.build_toy_tiny(tmp_path_factory.mktemp("tiny") / "model"))


def _config(tiny_dir, out, **train):
    return preset(
        "turn-ppo",
        model=tiny_dir,
        tasks_per_iteration=4,
        num_envs=4,
        max_new_tokens=3,
        minibatch_size=4,
        kl_coef=0.05,
        ema_decay=0.5,
        env=trainer_envs.ENV_ID,
        iterations=1,
        eval_episodes=4,
        eval_every=0,
        out=str(out),
        progress=False,
        **train,
    )


# A process that saves checkpoints back to back (iteration START, START+1, ...) and says so after each.
_SAVER = """
import sys, torch
sys.path[:0] = [{tests!r}, {root!r}]
import runpy, types
t = types.SimpleNamespace(**runpy.run_path({tests!r} + "/reference_trainer/test_checkpoint.py"))  # this test module, by its file
from reference_trainer.trainer import Trainer
tr = Trainer(t._config({tiny!r}, {out!r}))
tr.train_iteration()  # an optimizer with state, a moved weight average
if {pause}:  # stop inside the second save, after the policy is written and before the state: the parent kills it there
    import time
    import reference_trainer.policy as policy
    saves, save_policy = [], policy.save_policy
    def paused(*args, **kwargs):
        save_policy(*args, **kwargs)
        saves.append(1)
        if len(saves) == 2:
            print("inside", flush=True)
            time.sleep(600)
    policy.save_policy = paused
print("ready", flush=True)
i = {start}
while True:
    tr.iteration = i
    with torch.no_grad():
        next(tr.policy.parameters()).add_(1.0)  # every save holds different weights
    tr.save_checkpoint({path!r})
    print(i, flush=True)
    i += 1
"""


def _check_whole(path: Path) -> int:
    """Everything in the checkpoint loads; returns its iteration."""
    meta = checkpoint.read_meta(path)
    state = checkpoint.load_tensors(path)
    assert {"optimizer", "scheduler", "torch_generator", "averaged_lm"} <= set(state)
    policy, _ = load_policy(checkpoint.resolve(path) / "policy")
    assert all(torch.isfinite(p).all() for p in policy.parameters())
    return int(meta["iteration"])


def test_a_save_killed_at_random_moments_always_leaves_a_whole_checkpoint(tiny_dir, tmp_path):
    path = tmp_path / "run" / "checkpoint"
    rng = random.Random(0)
    iteration, interrupted = None, 0
    for kill in range(4):
        start = 0 if iteration is None else iteration + 1
        pause = kill == 2  # one kill lands inside a save for sure; the others at random moments
        code = _SAVER.format(
            tests=str(TESTS),
            root=str(ROOT),
            tiny=tiny_dir,
            out=str(tmp_path / "run"),
            start=start,
            path=str(path),
            pause=pause,
        )
        child = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        lines = []
        try:
            assert child.stdout.readline().strip() == "ready", child.stderr.read()
            if pause:
                while (line := child.stdout.readline().strip()) != "inside":
                    assert line, child.stderr.read()
                    lines.append(line)
            else:
                time.sleep(rng.uniform(0.05, 1.5))
            child.send_signal(signal.SIGKILL)
            out, _ = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
        saved = [int(line) for line in lines + out.split()]
        assert child.returncode == -signal.SIGKILL
        if iteration is None and not saved and not path.is_symlink():
            continue  # killed before the very first save finished: nothing to load yet
        got = _check_whole(path)
        # the last save it reported, or the one in flight if its switch landed before the kill
        last = saved[-1] if saved else (iteration if iteration is not None else -1)
        assert got in (last, last + 1) if saved else got in (last, start), (kill, saved, got)
        iteration = got
        leftovers = [p.name for p in path.parent.iterdir() if p.name.startswith(("checkpoint.", ".checkpoint."))]
        half_written = any(not (path.parent / n / checkpoint.STATE_FILE).exists() for n in leftovers)
        assert half_written or not pause, leftovers
        interrupted += half_written
    assert iteration is not None and iteration > 0
    assert interrupted > 0  # the paused kill landed inside a save
    # the next save clears what the interrupted ones left: one version directory remains
    tr = Trainer(_config(tiny_dir, tmp_path / "run2", resume=str(path)))
    assert tr.iteration == iteration
    tr.save_checkpoint(path)
    tr.close()
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith((".checkpoint", "checkpoint"))) == [
        "checkpoint",
        os.readlink(path),
    ]


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def test_a_crafted_pickle_in_a_checkpoint_is_refused_without_running(tiny_dir, tmp_path):
    tr = Trainer(_config(tiny_dir, tmp_path / "run"))
    path = tr.save_checkpoint(tmp_path / "ckpt")
    tr.close()
    marker = tmp_path / "marker"
    state_file = checkpoint.resolve(path) / checkpoint.TENSORS_FILE
    torch.save({"optimizer": _RunsCode(marker)}, state_file)
    with pytest.raises(ValueError, match=r"state\.pt: refused to load"):
        Trainer(_config(tiny_dir, tmp_path / "resumed", resume=str(path)))
    assert not marker.exists()
    # the value head next to the weights is read the same way
    torch.save(_RunsCode(marker), checkpoint.resolve(path) / "policy" / "value_head.pt")
    with pytest.raises(ValueError, match=r"value_head\.pt: refused to load") as refused:
        load_policy(path / "policy")
    assert not marker.exists()
    assert "weights_only=False" not in str(refused.value)  # torch's advice to load it anyway is not passed on


def test_a_checkpoint_of_the_old_layout_loads_and_is_replaced_atomically(tiny_dir, tmp_path):
    tr = Trainer(_config(tiny_dir, tmp_path / "run"))
    tr.iteration = 3
    new = tr.save_checkpoint(tmp_path / "new")
    old = tmp_path / "checkpoint"  # a plain directory, as older versions wrote, and their stale .tmp
    os.rename(checkpoint.resolve(new), old)
    (tmp_path / "checkpoint.tmp").mkdir()
    assert checkpoint.resolve(old) == old and checkpoint.read_meta(old)["iteration"] == 3
    tr.iteration = 4
    tr.save_checkpoint(old)
    tr.close()
    assert old.is_symlink() and checkpoint.read_meta(old)["iteration"] == 4
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("checkpoint")) == [
        "checkpoint",
        os.readlink(old),
    ]


def test_resolve_falls_back_to_the_newest_complete_version_and_says_what_to_pass(tmp_path):
    def write(directory):
        (directory / "policy").mkdir()

    checkpoint.save(tmp_path / "ck", write, {"iteration": 2})
    target = Path(os.path.realpath(tmp_path / "ck"))
    complete_copy = tmp_path / "ck.legacy.00ff"  # the moved-aside old directory of a save killed in its gap
    os.rename(target, complete_copy)
    (complete_copy / checkpoint.STATE_FILE).write_text(json.dumps({"iteration": 1}))
    partial = tmp_path / "ck.it000009.abc"  # an unfinished save: no trainer_state.json
    partial.mkdir()
    os.unlink(tmp_path / "ck")
    assert checkpoint.resolve(tmp_path / "ck") == complete_copy
    with pytest.raises(FileNotFoundError, match="no checkpoint there.*runs/train/checkpoint"):
        checkpoint.resolve(tmp_path / "elsewhere")


def test_a_save_that_fails_leaves_the_previous_checkpoint_and_no_leftovers(tmp_path):
    checkpoint.save(tmp_path / "ck", lambda d: (d / "policy").mkdir(), {"iteration": 1})

    def full_disk(directory):
        (directory / "policy").mkdir()
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        checkpoint.save(tmp_path / "ck", full_disk, {"iteration": 2})
    assert checkpoint.read_meta(tmp_path / "ck")["iteration"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ck", os.readlink(tmp_path / "ck")])


def test_save_policy_replaces_a_policy_whole_and_leaves_no_temporary_folder(tmp_path):
    from support import trainer_envs
    from reference_trainer.policy import load_policy, save_policy

    policy, tokenizer = load_policy(trainer_envs.build_toy_tiny(tmp_path / "toy"))
    target = tmp_path / "out" / "policy"
    save_policy(policy, tokenizer, target)
    (target / "stale.txt").write_text("from an older save")
    with torch.no_grad():
        next(policy.lm.parameters()).add_(1.0)
    save_policy(policy, tokenizer, target)
    assert not (target / "stale.txt").exists()  # the old folder was replaced, not written over
    assert sorted(p.name for p in target.parent.iterdir()) == ["policy"]
    again, _ = load_policy(target)
    assert torch.equal(next(again.lm.parameters()), next(policy.lm.parameters()))


@pytest.mark.parametrize(
    "edit", [{"iteration": -5}, {"iteration": "3"}, {"iteration": True}, {"sft_done": "yes"}, {"numpy_rng": None}]
)
def test_a_tampered_trainer_state_is_refused_naming_the_file(tiny_dir, tmp_path, edit):
    tr = Trainer(_config(tiny_dir, tmp_path / "run"))
    path = tr.save_checkpoint(tmp_path / "ckpt")
    tr.close()
    state = checkpoint.resolve(path) / checkpoint.STATE_FILE
    state.write_text(json.dumps({**json.loads(state.read_text()), **edit}))
    key = next(iter(edit))
    with pytest.raises(ValueError, match=rf"trainer_state\.json: not a trainer state written by this trainer: .*{key}"):
        Trainer(_config(tiny_dir, tmp_path / "resumed", resume=str(path)))


def test_a_truncated_tensor_file_is_refused_naming_the_file(tiny_dir, tmp_path):
    tr = Trainer(_config(tiny_dir, tmp_path / "run"))
    path = tr.save_checkpoint(tmp_path / "ckpt")
    tr.close()
    tensors = checkpoint.resolve(path) / checkpoint.TENSORS_FILE
    tensors.write_bytes(tensors.read_bytes()[:1000])
    with pytest.raises(ValueError, match=r"state\.pt: not a whole checkpoint written by this trainer"):
        Trainer(_config(tiny_dir, tmp_path / "resumed", resume=str(path)))
