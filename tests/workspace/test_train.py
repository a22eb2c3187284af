"""Tests for files/workspace/train.py, the DDP workload torchrun launches on every node.

Unit tests import the script as a module (config parsing, overrides, model FLOPs, formats).
``real`` tests run it for real: under ``torch.distributed.run`` with 4 CPU ranks (gloo), as two
"nodes" of 2 ranks each, and as bare processes to prove the process-group timeout. Every
subprocess has a timeout.
"""
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKSPACE = os.path.join(REPO, "files", "workspace")
TRAIN = os.path.join(WORKSPACE, "train.py")
CONFIG_DIR = os.path.join(WORKSPACE, "config")

RUN_TIMEOUT = 240  # seconds for one torchrun job; they take ~10-20 s on 2 cores

#: A few-second job: 1024 samples / (4 ranks x 16) = 16 steps per epoch, 2 epochs.
TINY = [
    "model.hidden=64", "model.depth=2", "model.mlp_ratio=2", "data.num_samples=1024",
    "training.epochs=2", "training.batch_size=16", "training.lr=0.003", "training.warmup_steps=2",
    "training.log_interval=4",
]
TINY_STEPS = 32

PROGRESS_RE = re.compile(
    r"^\[trainops\] node=(?P<node>\S+) rank=(?P<rank>\d+)/(?P<ws>\d+) epoch=(?P<epoch>\d+) "
    r"step=(?P<step>\d+)/(?P<total>\d+) loss=(?P<loss>\d+\.\d{4}) samples_per_s=(?P<sps>\d+\.\d)$")
DONE_RE = re.compile(r"^\[trainops\] done node=(?P<node>\S+) rank=(?P<rank>\d+)/(?P<ws>\d+) final_loss=(?P<loss>\d+\.\d{4})$")
METRIC_KEYS = {"rank", "world_size", "local_rank", "node", "epoch", "step", "global_step", "loss", "grad_norm", "lr",
               "step_time_s", "compute_time_s", "samples_per_s", "tflops"}


def _load_train_module():
    spec = importlib.util.spec_from_file_location("trainops_workspace_train", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = _load_train_module()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**extra):
    env = dict(os.environ)
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def torchrun_cmd(out_dir, overrides=(), nproc=4, nnodes=1, node_rank=0, port=None):
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--node-rank", str(node_rank),
            "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1", "--master-port", str(port or free_port()),
            TRAIN, "--override", "training.output_dir=%s" % out_dir] + ["--override=%s" % o for o in overrides]


def run_torchrun(out_dir, overrides=(), env=None, timeout=RUN_TIMEOUT, nproc=4):
    proc = subprocess.run(torchrun_cmd(out_dir, overrides, nproc=nproc), env=env or child_env(), cwd=str(out_dir.parent),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout


def read_metrics(out_dir, rank):
    with open(os.path.join(str(out_dir), "rank_%02d_metrics.jsonl" % rank)) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_ckpt(path):
    import torch
    return torch.load(str(path), map_location="cpu", weights_only=True)


# ---------------------------------------------------------------------------------------------
# Config and overrides (no processes)
# ---------------------------------------------------------------------------------------------

def test_default_yaml_mirrors_defaults():
    assert train.load_config(os.path.join(CONFIG_DIR, "default.yaml")) == train.DEFAULTS
    assert train.DEFAULT_CONFIG_PATH == os.path.join(CONFIG_DIR, "default.yaml")


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(CONFIG_DIR) if n.endswith((".yaml", ".yml"))))
def test_every_shipped_config_is_valid(name):
    cfg = train.load_config(os.path.join(CONFIG_DIR, name))
    with train.torch.device("meta"):  # shapes only: config/gpu.yaml's 0.8 B parameters are not allocated
        model = train.build_model(cfg["model"])
    assert train.train_flops_per_sample(model) > 0


def test_overrides_are_yaml_scalars_with_dotted_keys():
    cfg = train.load_config(None, ["training.output_dir=/x", "model.hidden=512", "training.lr=0.01", "training.resume=true",
                                   "debug.fail_rank=1", "debug.fail_step=3", "training.max_steps=null", "training.lr=1e-3",
                                   "distributed.timeout_s=30", "debug.sleep_per_step_s=1", "data.noise=0"])
    assert cfg["training"]["output_dir"] == "/x"
    assert cfg["model"]["hidden"] == 512
    assert cfg["training"]["lr"] == pytest.approx(1e-3) and isinstance(cfg["training"]["lr"], float)  # last one wins
    assert cfg["training"]["resume"] is True
    assert (cfg["debug"]["fail_rank"], cfg["debug"]["fail_step"]) == (1, 3)
    assert cfg["training"]["max_steps"] is None
    assert cfg["distributed"]["timeout_s"] == 30
    assert cfg["debug"]["sleep_per_step_s"] == 1.0 and isinstance(cfg["debug"]["sleep_per_step_s"], float)
    assert cfg["data"]["noise"] == 0.0


def test_file_then_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  hidden: 128\ntraining:\n  epochs: 5\n  lr: 1e-4\n")
    cfg = train.load_config(str(path), ["training.epochs=7"])
    assert cfg["model"]["hidden"] == 128 and cfg["model"]["depth"] == train.DEFAULTS["model"]["depth"]
    assert cfg["training"]["epochs"] == 7
    assert cfg["training"]["lr"] == pytest.approx(1e-4)


def test_launcher_collective_timeout_sits_between_file_and_overrides(tmp_path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text("distributed:\n  timeout_s: 600\n")
    monkeypatch.setenv("TRAINOPS_COLLECTIVE_TIMEOUT_S", "20")
    assert train.load_config(str(path))["distributed"]["timeout_s"] == 20
    assert train.load_config(str(path), ["distributed.timeout_s=45"])["distributed"]["timeout_s"] == 45
    monkeypatch.setenv("TRAINOPS_COLLECTIVE_TIMEOUT_S", "soon")
    with pytest.raises(train.ConfigError, match="TRAINOPS_COLLECTIVE_TIMEOUT_S"):
        train.load_config(str(path))


def test_cli_accepts_repeated_and_multi_value_overrides():
    args = train.build_arg_parser().parse_args(["--override", "training.output_dir=/x", "model.hidden=512", "--override", "training.lr=0.01"])
    flat = [t for group in args.override for t in group]
    assert flat == ["training.output_dir=/x", "model.hidden=512", "training.lr=0.01"]
    assert args.config == train.DEFAULT_CONFIG_PATH


@pytest.mark.parametrize("override, message", [
    ("training.lr", "expected KEY=VALUE"),
    ("=3", "expected KEY=VALUE"),
    ("training..lr=3", "expected KEY=VALUE"),
    ("training.lr.=3", "expected KEY=VALUE"),
    ("training.lrr=0.1", "unknown config key 'training.lrr'"),
    ("nosuch.key=1", "unknown config key 'nosuch'"),
    ("training=1", "is a section"),
    ("training.lr.x=1", "is a value, not a section"),
    ("training.epochs=abc", "must be an integer"),
    ("training.epochs=1.5", "must be an integer"),
    ("training.lr=fast", "must be a number"),
    ("training.resume=maybe", "must be true or false"),
    ("model.type=cnn", "must be one of mlp|transformer"),
    ("distributed.backend=tcp", "must be one of"),
    ("training.batch_size=0", "must be > 0"),
    ("distributed.timeout_s=0", "must be > 0"),
    ("debug.fail_rank=1", "must be set together"),
    ("debug.slow_step_s=0.1", "needs debug.slow_node_rank"),
    ("debug.slow_step_s=-1", "must be >= 0"),
    ("debug.slow_node_rank=-1", "must be >= 0 or null"),
    ("debug.slow_node_rank=x", "must be an integer"),
    ("debug.slow_local_rank=1", "needs debug.slow_node_rank"),
    ("debug.slow_local_rank=-1", "must be >= 0"),
    ("model.heads=3", None),  # fine for the MLP ...
    ("training.lr=[1, 2]", "must be a scalar"),
])
def test_bad_overrides_are_clear_errors(override, message):
    if message is None:
        train.load_config(None, [override])
        with pytest.raises(train.ConfigError, match="divisible"):  # ... not for the transformer
            train.load_config(None, [override, "model.type=transformer"])
        return
    with pytest.raises(train.ConfigError, match=re.escape(message)):
        train.load_config(None, [override])


def test_bad_config_files(tmp_path):
    missing = tmp_path / "missing.yaml"
    with pytest.raises(train.ConfigError, match="cannot read config file"):
        train.load_config(str(missing))
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(train.ConfigError, match="mapping at the top level"):
        train.load_config(str(listy))
    typo = tmp_path / "typo.yaml"
    typo.write_text("training:\n  epoch: 3\n")
    with pytest.raises(train.ConfigError, match="unknown config key 'training.epoch'"):
        train.load_config(str(typo))


def test_bad_override_from_the_command_line_exits_2_before_any_distributed_setup(tmp_path):
    proc = subprocess.run([sys.executable, TRAIN, "--override", "training.lr"], env=child_env(), cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert "invalid --override 'training.lr': expected KEY=VALUE" in proc.stderr
    assert proc.stdout == ""


def test_print_config(tmp_path):
    import yaml
    proc = subprocess.run([sys.executable, TRAIN, "--print-config", "--override", "model.hidden=96", "training.output_dir=/x"],
                          env=child_env(), cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    assert cfg["model"]["hidden"] == 96 and cfg["training"]["output_dir"] == "/x"


# ---------------------------------------------------------------------------------------------
# Model, data, formats (no processes)
# ---------------------------------------------------------------------------------------------

def test_mlp_flops_match_torch_flop_counter():
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    cfg = train.load_config(None, ["model.hidden=64", "model.depth=2"])
    model = train.build_model(cfg["model"])
    x = torch.randn(8, cfg["model"]["in_dim"])
    with FlopCounterMode(display=False) as fwd:
        model(x)
    assert fwd.get_total_flops() == 8 * model.forward_flops_per_sample()
    with FlopCounterMode(display=False) as step:
        model(x).sum().backward()
    assert step.get_total_flops() == 8 * train.train_flops_per_sample(model)


def test_transformer_flops_match_counter_up_to_sdpa():
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    cfg = train.load_config(None, ["model.type=transformer", "model.hidden=32", "model.heads=2", "model.seq_len=8",
                                   "model.in_dim=16", "model.depth=2"])
    model = train.build_model(cfg["model"])
    x = torch.randn(4, 8, 16)
    with FlopCounterMode(display=False) as fwd:
        assert model(x).shape == (4, cfg["model"]["out_dim"])
    attention = 2 * 2 * 8 * 8 * 32 * 2  # depth * (QK^T + AV) * 2 flops per MAC
    counted = fwd.get_total_flops() / 4
    # Some torch builds count the CPU SDPA kernel, some do not.
    assert model.forward_flops_per_sample() in (counted, counted + attention)


def test_dataset_is_deterministic_and_standardised():
    a = train.TeacherDataset(512, 8, 4, 16, 0.0, seed=7)
    b = train.TeacherDataset(512, 8, 4, 16, 0.0, seed=7)
    c = train.TeacherDataset(512, 8, 4, 16, 0.0, seed=8)
    assert len(a) == 512
    assert (a.inputs == b.inputs).all() and (a.targets == b.targets).all()
    assert not (a.inputs == c.inputs).all()
    assert abs(float(a.targets.mean())) < 1e-4 and abs(float(a.targets.std()) - 1.0) < 1e-2
    x, y = a[3]
    assert x.shape == (8,) and y.shape == (4,)


def test_lr_schedule_warmup_then_cosine_to_floor():
    f = train.lr_lambda_factory(warmup_steps=4, total_steps=20, min_ratio=0.1)
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    values = [f(s) for s in range(4, 21)]
    assert values == sorted(values, reverse=True)
    assert f(20) == pytest.approx(0.1) and f(100) == pytest.approx(0.1)


def test_data_parallel_plan_keeps_the_global_batch_when_the_world_size_divides():
    fresh = train.data_parallel_plan(4, 8192, 64)
    assert (fresh["accumulation_steps"], fresh["replicas"], fresh["global_batch"], fresh["steps_per_epoch"]) == (1, 4, 256, 32)
    assert fresh["previous_world_size"] is None and fresh["global_batch_kept"] and fresh["note"] is None
    # 4 -> 2 at any step: two batches per rank and step, the steps per epoch of the checkpoint
    half = train.data_parallel_plan(2, 8192, 64, {"world_size": 4, "data_world_size": 4, "steps_per_epoch": 32})
    assert (half["accumulation_steps"], half["replicas"], half["global_batch"], half["steps_per_epoch"]) == (2, 4, 256, 32)
    assert half["previous_world_size"] == 4 and half["global_batch_kept"]
    assert half["note"] == "resumed on world size 2 (was 4): gradient accumulation 2 keeps the global batch of 256 samples"
    # a checkpoint of that run, resumed on 2 again: still the 4-rank global batch; an older checkpoint: its world size
    again = train.data_parallel_plan(2, 8192, 64, {"world_size": 2, "data_world_size": 4, "steps_per_epoch": 32})
    assert (again["accumulation_steps"], again["global_batch"], again["previous_world_size"]) == (2, 256, 2)
    older = train.data_parallel_plan(1, 8192, 64, {"world_size": 4})
    assert (older["accumulation_steps"], older["global_batch"], older["steps_per_epoch"]) == (4, 256, 32)
    same = train.data_parallel_plan(4, 8192, 64, {"world_size": 4, "data_world_size": 4, "steps_per_epoch": 32})
    assert same["note"] is None and same["accumulation_steps"] == 1


def test_data_parallel_plan_says_when_the_global_batch_changes():
    three = train.data_parallel_plan(3, 8192, 64, {"world_size": 4, "data_world_size": 4, "steps_per_epoch": 32})
    assert (three["accumulation_steps"], three["replicas"], three["global_batch"], three["steps_per_epoch"]) == (1, 3, 192, 32)
    assert not three["global_batch_kept"] and three["previous_global_batch"] == 256
    assert "the global batch CHANGES from 256 to 192 samples" in three["note"]
    # more ranks than the checkpoint's batches: a smaller shard each, so fewer steps per epoch
    more = train.data_parallel_plan(4, 1024, 16, {"world_size": 2, "steps_per_epoch": 32})
    assert (more["accumulation_steps"], more["global_batch"], more["steps_per_epoch"]) == (1, 64, 16)
    assert "CHANGES from 32 to 64" in more["note"]
    # values that are no counts are not believed
    odd = train.data_parallel_plan(2, 8192, 64, {"world_size": True, "data_world_size": "4", "steps_per_epoch": -1})
    assert (odd["accumulation_steps"], odd["previous_world_size"], odd["steps_per_epoch"]) == (1, None, 64)


def test_a_slow_node_or_one_slow_rank_of_it_on_purpose():
    node = train.load_config(None, ["debug.slow_node_rank=1", "debug.slow_step_s=0.5"])["debug"]
    assert [train.slow_seconds(node, g, l) for g, l in ((0, 0), (1, 0), (1, 3))] == [0.0, 0.5, 0.5]
    one = train.load_config(None, ["debug.slow_node_rank=1", "debug.slow_step_s=0.5", "debug.slow_local_rank=3"])["debug"]
    assert [train.slow_seconds(one, g, l) for g, l in ((0, 3), (1, 0), (1, 3))] == [0.0, 0.0, 0.5]
    assert train.slow_seconds(train.load_config(None)["debug"], 0, 0) == 0.0


def test_output_line_formats():
    line = train.progress_line("gpu-01", 3, 16, 1, 40, 96, 0.123456, 1234.56)
    assert line == "[trainops] node=gpu-01 rank=3/16 epoch=1 step=40/96 loss=0.1235 samples_per_s=1234.6"
    assert PROGRESS_RE.match(line)
    done = train.done_line("gpu-01", 3, 16, 0.05)
    assert done == "[trainops] done node=gpu-01 rank=3/16 final_loss=0.0500" and DONE_RE.match(done)


def test_backend_and_device_selection():
    import torch
    cpu = torch.device("cpu")
    assert train.select_backend("auto", cpu) == "gloo"
    assert train.select_backend("auto", torch.device("cuda", 0)) == "nccl"  # RCCL on ROCm builds
    assert train.select_backend("gloo", torch.device("cuda", 0)) == "gloo"
    assert train.accelerator_name(cpu) == "cpu"
    assert train.select_device("cpu", 0) == cpu
    if not torch.cuda.is_available():
        assert train.select_device("auto", 0) == cpu
        with pytest.raises(RuntimeError, match="cuda"):
            train.select_device("cuda", 0)


def test_collected_env_filters_prefixes(monkeypatch):
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")
    monkeypatch.setenv("TORCH_NCCL_BLOCKING_WAIT", "1")
    monkeypatch.setenv("HSA_FORCE_FINE_GRAIN_PCIE", "1")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    env = train.collected_env()
    assert env["NCCL_IB_HCA"] == "mlx5_0" and env["TORCH_NCCL_BLOCKING_WAIT"] == "1" and env["HSA_FORCE_FINE_GRAIN_PCIE"] == "1"
    assert "UNRELATED_SECRET" not in env


# ---------------------------------------------------------------------------------------------
# Real runs
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """One 4-rank torchrun of the tiny job, shared by the assertions below."""
    out = tmp_path_factory.mktemp("base") / "out"
    env = child_env(NCCL_DEBUG="WARN", NCCL_TRAINOPS_MARKER="nccl-marker", GLOO_TRAINOPS_MARKER="gloo-marker")
    started = time.monotonic()
    rc, output = run_torchrun(out, TINY, env=env)
    return {"out": out, "rc": rc, "output": output, "wall_s": time.monotonic() - started}


@pytest.mark.real
@pytest.mark.slow
def test_torchrun_four_ranks_train_and_report(base_run):
    out, output = base_run["out"], base_run["output"]
    assert base_run["rc"] == 0, output
    names = sorted(os.listdir(str(out)))
    assert [n for n in names if n.endswith("_metrics.jsonl")] == ["rank_%02d_metrics.jsonl" % r for r in range(4)]
    assert [n for n in names if n.endswith("_env.json")] == ["rank_%02d_env.json" % r for r in range(4)]
    host = socket.gethostname()
    for rank in range(4):
        records = read_metrics(out, rank)
        assert records, rank
        for rec in records:
            assert METRIC_KEYS <= set(rec), rec
            assert (rec["rank"], rec["world_size"], rec["local_rank"], rec["node"]) == (rank, 4, rank, host)
            assert rec["step_time_s"] > 0 and rec["samples_per_s"] > 0 and rec["grad_norm"] >= 0 and rec["lr"] > 0
            # the rank's own part of a step (forward and loss) is a part of the step's wall time
            assert 0 < rec["compute_time_s"] < rec["step_time_s"], rec
            assert rec["tflops"] is None or rec["tflops"] > 0
        steps = [r["global_step"] for r in records]
        assert steps == sorted(steps) and steps[0] == 1 and steps[-1] == TINY_STEPS
        assert records[-1]["loss"] < 0.7 * records[0]["loss"], [r["loss"] for r in records]
    # The logged loss is the global mean, so every rank logs the same value.
    assert len({read_metrics(out, r)[-1]["loss"] for r in range(4)}) == 1


@pytest.mark.real
@pytest.mark.slow
def test_torchrun_stdout_progress_and_done_lines(base_run):
    lines = base_run["output"].splitlines()
    progress = [PROGRESS_RE.match(line) for line in lines if line.startswith("[trainops] node=")]
    assert progress and all(progress), lines
    assert {m.group("rank") for m in progress} == {"0"}  # one node: only its local rank 0 prints
    assert [int(m.group("step")) for m in progress] == [1, 4, 8, 12, 16, 20, 24, 28, 32]
    assert {m.group("total") for m in progress} == {str(TINY_STEPS)} and {m.group("ws") for m in progress} == {"4"}
    done = [DONE_RE.match(line) for line in lines if line.startswith("[trainops] done")]
    assert all(done) and sorted(int(m.group("rank")) for m in done) == [0, 1, 2, 3]
    assert float(progress[-1].group("loss")) < float(progress[0].group("loss"))


@pytest.mark.real
@pytest.mark.slow
def test_torchrun_env_file_records_comm_variables(base_run):
    assert base_run["rc"] == 0, base_run["output"]
    for rank in range(4):
        with open(os.path.join(str(base_run["out"]), "rank_%02d_env.json" % rank)) as handle:
            env = json.load(handle)
        assert (env["rank"], env["world_size"], env["local_rank"], env["local_world_size"], env["group_rank"]) == (rank, 4, rank, 4, 0)
        assert env["hostname"] == socket.gethostname()
        assert env["master_addr"] == "127.0.0.1" and env["master_port"]
        assert env["backend"] == "gloo" and env["device"] == "cpu" and env["accelerator"] == "cpu"
        assert env["torch_version"]
        assert env["cpu_affinity"] == sorted(os.sched_getaffinity(0))  # (the test's own CPUs: nothing narrowed them)
        assert env["process_env"]["HOME"] == os.environ.get("HOME") and env["python_executable"]
        assert env["env"]["NCCL_TRAINOPS_MARKER"] == "nccl-marker"
        assert env["env"]["GLOO_TRAINOPS_MARKER"] == "gloo-marker"
        assert env["env"]["NCCL_DEBUG"] == "WARN"


@pytest.fixture(scope="module")
def resumed_run(base_run, tmp_path_factory):
    """base_run's checkpoint resumed on its 4 ranks for a third epoch (a copy of its output directory)."""
    out = tmp_path_factory.mktemp("resumed") / "out"
    shutil.copytree(str(base_run["out"]), str(out))
    before = read_metrics(out, 1)
    rc, output = run_torchrun(out, TINY + ["training.epochs=3", "training.resume=true"])
    return {"out": out, "rc": rc, "output": output, "before": before}


@pytest.mark.real
@pytest.mark.slow
def test_checkpoint_and_resume_continue_global_step(base_run, resumed_run):
    assert base_run["rc"] == 0, base_run["output"]
    ckpt = load_ckpt(base_run["out"] / "checkpoint.pt")
    assert ckpt["global_step"] == TINY_STEPS and ckpt["epoch"] == 1
    assert {"model", "optimizer", "config"} <= set(ckpt)
    assert (ckpt["data_world_size"], ckpt["steps_per_epoch"], ckpt["total_steps"], ckpt["global_batch"]) == (4, 16, 32, 64)
    assert not [n for n in os.listdir(str(base_run["out"])) if ".tmp." in n]

    out, output, before = resumed_run["out"], resumed_run["output"], resumed_run["before"]
    assert resumed_run["rc"] == 0, output
    after = read_metrics(out, 1)
    assert after[:len(before)] == before  # appended, not truncated
    resumed = after[len(before):]
    assert resumed[0]["global_step"] == TINY_STEPS + 1 and resumed[0]["epoch"] == 2
    assert resumed[-1]["global_step"] == 3 * TINY_STEPS // 2
    assert resumed[0]["loss"] < before[0]["loss"] * 0.7  # model and optimizer state came back
    steps = [int(m.group("step")) for m in map(PROGRESS_RE.match, output.splitlines()) if m]
    assert steps[0] == TINY_STEPS + 1 and steps[-1] == 48
    assert load_ckpt(out / "checkpoint.pt")["global_step"] == 48
    assert "resumed on world size" not in output  # the same world size: nothing changed
    with open(os.path.join(str(out), "rank_00_env.json")) as handle:
        assert json.load(handle)["resumed_from_global_step"] == TINY_STEPS


@pytest.mark.real
@pytest.mark.slow
def test_resume_on_half_the_ranks_keeps_the_global_batch_and_the_schedule(base_run, resumed_run, tmp_path):
    """4 -> 2 ranks (a retry on fewer nodes, trainops_min_nodes): each rank accumulates the gradients of two of the
    4-rank run's shards, so every step has the global batch, the samples, the epoch, the total steps and the learning
    rate of the same resume on 4 ranks, and the same loss up to the order of the float sums."""
    assert base_run["rc"] == 0 and resumed_run["rc"] == 0, resumed_run["output"]
    out = tmp_path / "out"
    shutil.copytree(str(base_run["out"]), str(out))
    rc, output = run_torchrun(out, TINY + ["training.epochs=3", "training.resume=true"], nproc=2)
    assert rc == 0, output
    assert "[trainops] resumed on world size 2 (was 4): gradient accumulation 2 keeps the global batch of 64 samples" in output
    full = [r for r in read_metrics(resumed_run["out"], 0) if r["global_step"] > TINY_STEPS]
    half = [r for r in read_metrics(out, 0) if r["global_step"] > TINY_STEPS]
    assert [r["global_step"] for r in half] == [r["global_step"] for r in full] == [33, 36, 40, 44, 48]
    for two, four in zip(half, full):
        assert (two["epoch"], two["step"], two["total_steps"], two["global_batch"]) == (
            four["epoch"], four["step"], four["total_steps"], four["global_batch"]) == (2, two["step"], 48, 64)
        assert two["lr"] == pytest.approx(four["lr"], rel=1e-9)
        assert two["loss"] == pytest.approx(four["loss"], rel=1e-3)
        assert (two["world_size"], two["previous_world_size"], two["accumulation_steps"], two["global_batch_kept"]) == (2, 4, 2, True)
        assert (four["previous_world_size"], four["accumulation_steps"]) == (4, 1)
    saved = load_ckpt(out / "checkpoint.pt")
    assert (saved["world_size"], saved["data_world_size"], saved["global_batch"], saved["total_steps"]) == (2, 4, 64, 48)


@pytest.mark.parametrize("value, expected", [(None, "SIGUSR1"), ("USR1", "SIGUSR1"), ("sigusr2", "SIGUSR2"), (" USR2 ", "SIGUSR2")])
def test_checkpoint_signal_from_the_environment(value, expected):
    environ = {} if value is None else {train.CHECKPOINT_SIGNAL_ENV: value}
    watch = train.CheckpointSignal(environ)
    assert watch.name == expected and watch.signum == getattr(signal, expected) and not watch.pending


@pytest.mark.parametrize("value", ["TERM", "SIGINT", "KILL", "10", "NOSUCH"])
def test_checkpoint_signal_refuses_a_signal_that_is_not_usr1_or_usr2(value):
    with pytest.raises(ValueError, match="TRAINOPS_CHECKPOINT_SIGNAL"):
        train.CheckpointSignal({train.CHECKPOINT_SIGNAL_ENV: value})


def test_checkpoint_line_format():
    assert train.checkpoint_line("n1", 3, 8, 12, "SIGUSR1") == "[trainops] checkpoint at global step 12 on SIGUSR1 node=n1 rank=3/8"
    # the wait's progress pattern ((?:epoch|step)=...) must not take it for a progress line
    assert not re.search(r"\b(?:epoch|step)=", train.checkpoint_line("n1", 3, 8, 12, "SIGUSR1"))


def _ignore_usr1():
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


@pytest.mark.real
@pytest.mark.slow
def test_checkpoint_signal_to_one_rank_checkpoints_on_every_rank_at_the_same_step(tmp_path):
    out = tmp_path / "out"
    # torchrun as the supervisor starts it: USR1 ignored (torchrun survives Slurm's signal), the ranks handle it
    proc = subprocess.Popen(torchrun_cmd(out, TINY + ["debug.sleep_per_step_s=0.2"]), env=child_env(),
                            cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                            preexec_fn=_ignore_usr1)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        envs = [out / ("rank_%02d_env.json" % rank) for rank in range(4)]
        while not all(path.exists() for path in envs):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0]
            time.sleep(0.1)
        with open(str(envs[2])) as handle:
            os.kill(json.load(handle)["pid"], signal.SIGUSR1)  # one rank only: the others learn it from the flag
        output = proc.communicate(timeout=RUN_TIMEOUT)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    lines = [line for line in output.splitlines() if line.startswith("[trainops] checkpoint at global step")]
    steps = set(int(line.split()[5]) for line in lines)
    assert len(lines) == 4 and len(steps) == 1, output
    step = steps.pop()
    assert 0 < step < TINY_STEPS
    assert sorted(int(re.search(r"rank=(\d+)/4", line).group(1)) for line in lines) == [0, 1, 2, 3]
    assert all(line.endswith("/4") and " on SIGUSR1 node=" in line for line in lines)
    with open(str(out / "checkpoint.json")) as handle:
        record = json.load(handle)
    assert record["reason"] == "end" and record["global_step"] == TINY_STEPS  # the last checkpoint
    signalled = record["last_signal_checkpoint"]
    assert signalled["global_step"] == step and signalled["signal"] == "SIGUSR1" and signalled["reason"] == "signal"
    assert signalled["path"] == str(out / "checkpoint.pt")
    assert len(read_metrics(out, 0)) > 0  # the metrics are the usual ones


@pytest.mark.real
@pytest.mark.slow
def test_resume_without_checkpoint_starts_fresh(tmp_path):
    out = tmp_path / "out"
    rc, output = run_torchrun(out, TINY + ["training.max_steps=3", "training.resume=true"])
    assert rc == 0, output
    assert "no %s" % os.path.join(str(out), "checkpoint.pt") in output
    assert [r["global_step"] for r in read_metrics(out, 3)] == [1, 3]
    assert load_ckpt(out / "checkpoint.pt")["global_step"] == 3


@pytest.mark.real
@pytest.mark.slow
def test_failure_injection_fails_the_job(tmp_path):
    out = tmp_path / "out"
    started = time.monotonic()
    rc, output = run_torchrun(out, TINY + ["debug.fail_rank=2", "debug.fail_step=3"])
    assert rc != 0
    assert "RuntimeError: debug failure injected: rank 2 at global_step 3" in output
    # @record hands the exception to torchrun, which names the failing rank as the root cause.
    root_cause = output.split("Root Cause (first observed failure)", 1)[1]
    assert re.search(r"rank\s*:\s*2 \(local_rank: 2\)", root_cause), root_cause
    assert "debug failure injected" in root_cause
    assert time.monotonic() - started < RUN_TIMEOUT
    assert [r["global_step"] for r in read_metrics(out, 2)] == [1]  # it did run step 1 and failed before step 3 finished


@pytest.mark.real
@pytest.mark.slow
def test_two_nodes_each_print_progress(tmp_path):
    """Two torchrun agents (--nnodes 2, 2 ranks each) on one host: both nodes' local rank 0 report. Node 1 is a
    straggler on purpose (debug.slow_node_rank): its ranks' compute_time_s is longer, while every rank's step_time_s
    is about the same (the fast ranks wait for the slow ones in the gradient all-reduce)."""
    out = tmp_path / "out"
    outs = _two_nodes(tmp_path, [out, out], TINY + ["debug.sleep_per_step_s=0.01", "debug.slow_node_rank=1",
                                                    "debug.slow_step_s=0.05"], nproc=2)
    for node_rank, output in enumerate(outs):
        ranks = {m.group("rank") for m in map(PROGRESS_RE.match, output.splitlines()) if m}
        assert ranks == {str(2 * node_rank)}, output
        assert {m.group("rank") for m in map(DONE_RE.match, output.splitlines()) if m} == {str(2 * node_rank), str(2 * node_rank + 1)}
    for rank in range(4):
        with open(os.path.join(str(tmp_path / "out"), "rank_%02d_env.json" % rank)) as handle:
            env = json.load(handle)
        assert (env["group_rank"], env["local_rank"], env["local_world_size"], env["world_size"]) == (rank // 2, rank % 2, 2, 4)
    last = [read_metrics(tmp_path / "out", rank)[-3:] for rank in range(4)]
    compute = [statistics.median(r["compute_time_s"] for r in records) for records in last]
    step = [statistics.median(r["step_time_s"] for r in records) for records in last]
    assert min(compute[2:]) >= 0.05 > max(compute[:2]), compute
    # the slow node sets every rank's pace: each rank's step takes at least the slow node's sleep
    assert min(step) >= 0.05, step


def _two_nodes(tmp_path, outs, overrides, nproc=1):
    """Two torchrun agents (--nnodes 2) on this host, node rank i writing into outs[i]; their outputs."""
    port = free_port()
    procs = [subprocess.Popen(torchrun_cmd(outs[node_rank], overrides, nproc=nproc, nnodes=2, node_rank=node_rank,
                                           port=port),
                              env=child_env(), cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True) for node_rank in range(2)]
    try:
        texts = [proc.communicate(timeout=RUN_TIMEOUT)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    assert [p.returncode for p in procs] == [0, 0], texts
    return texts


@pytest.mark.real
@pytest.mark.slow
def test_every_node_writes_the_checkpoint_and_a_resume_on_another_world_size_goes_on(tmp_path):
    """The checkpoint survives the node that wrote it: each node's local rank 0 writes the same checkpoint.pt and
    checkpoint.json into its own output directory. Resuming it on one node (world size 3 instead of 2, as a retry on
    fewer nodes or with a spare would) continues the global step, the data sharded over the new world size."""
    outs = [tmp_path / "node0", tmp_path / "node1"]
    _two_nodes(tmp_path, outs, TINY + ["training.max_steps=12", "training.checkpoint_interval=5"])
    saved = [load_ckpt(out / "checkpoint.pt") for out in outs]
    assert [c["global_step"] for c in saved] == [12, 12] and saved[0]["world_size"] == 2
    for name, tensor in saved[0]["model"].items():
        assert train.torch.equal(tensor, saved[1]["model"][name]), name
    records = []
    for out in outs:
        with open(str(out / "checkpoint.json")) as handle:
            records.append(json.load(handle))
        assert not [n for n in os.listdir(str(out)) if ".tmp." in n]
    assert [(r["global_step"], r["reason"], r["path"]) for r in records] == [
        (12, "end", str(out / "checkpoint.pt")) for out in outs]

    # node0 is lost: node1's copy resumes on 3 ranks of one node
    shutil.rmtree(str(outs[0]))
    rc, output = _resume(outs[1], 3)
    assert rc == 0, output
    resumed = [r for r in read_metrics(outs[1], 2) if r["world_size"] == 3]
    assert resumed and resumed[0]["global_step"] == 13 and resumed[-1]["global_step"] == 20, resumed
    assert load_ckpt(outs[1] / "checkpoint.pt")["world_size"] == 3
    # 2 batches per step are no multiple of 3 ranks: the global batch changes, and the log and the metrics say so
    assert "the global batch CHANGES from 32 to 48 samples" in output
    assert {(r["previous_world_size"], r["global_batch"], r["global_batch_kept"]) for r in resumed} == {(2, 48, False)}


def _resume(out, nproc):
    proc = subprocess.run(torchrun_cmd(out, TINY + ["training.max_steps=20", "training.resume=true"], nproc=nproc),
                          env=child_env(), cwd=str(out.parent), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=RUN_TIMEOUT, check=False)
    return proc.returncode, proc.stdout


@pytest.mark.real
@pytest.mark.slow
def test_nodes_sharing_one_output_directory_write_one_checkpoint_safely(tmp_path):
    """Shared storage: both nodes write checkpoint.pt into the same directory at the same steps, each through a temp
    file of its own renamed over it; one whole checkpoint is left, and no temp file."""
    out = tmp_path / "shared"
    _two_nodes(tmp_path, [out, out], TINY + ["training.max_steps=10", "training.checkpoint_interval=1"])
    assert load_ckpt(out / "checkpoint.pt")["global_step"] == 10
    assert not [n for n in os.listdir(str(out)) if ".tmp." in n]
    assert train.temp_path("/x/checkpoint.pt") == "/x/checkpoint.pt.tmp.%s.%d" % (socket.gethostname(), os.getpid())


@pytest.mark.real
def test_single_process_without_torchrun(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, TRAIN, "--override", "training.output_dir=%s" % out, "training.max_steps=5"] +
                          ["--override=%s" % o for o in TINY], env=child_env(), cwd=str(tmp_path), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(PROGRESS_RE.match(line) or DONE_RE.match(line) for line in lines), lines
    assert lines[0].startswith("[trainops] node=%s rank=0/1 epoch=0 step=1/5 " % socket.gethostname())
    assert DONE_RE.match(lines[-1])
    assert [r["global_step"] for r in read_metrics(out, 0)] == [1, 4, 5]


@pytest.mark.real
@pytest.mark.slow
def test_lost_peer_hits_the_process_group_timeout(tmp_path):
    """Freeze rank 1 mid-run: rank 0 must fail after distributed.timeout_s instead of hanging forever."""
    out = tmp_path / "out"
    port = free_port()
    procs = []
    try:
        for rank in range(2):
            env = child_env(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                            MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            cmd = [sys.executable, TRAIN, "--override", "training.output_dir=%s" % out, "distributed.timeout_s=5",
                   "debug.sleep_per_step_s=0.05"] + ["--override=%s" % o for o in TINY]
            procs.append(subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          universal_newlines=True))
        metrics = out / "rank_01_metrics.jsonl"
        deadline = time.monotonic() + 120
        while not (metrics.exists() and metrics.stat().st_size) and time.monotonic() < deadline:
            assert procs[0].poll() is None and procs[1].poll() is None
            time.sleep(0.1)
        assert metrics.exists(), "rank 1 never logged a step"
        procs[1].send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        _out, err = procs[0].communicate(timeout=90)
        waited = time.monotonic() - frozen_at
        assert procs[0].returncode != 0, err
        assert 3 < waited < 80, waited
        assert "timed out" in err.lower(), err  # gloo: "Timed out waiting 5000ms for recv operation"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            proc.communicate(timeout=30)


def test_fail_mode_hang_sleeps_forever_outside_any_collective(monkeypatch, capsys):
    class Slept(Exception):
        pass

    def sleep(seconds):
        assert seconds > 0
        raise Slept()
    monkeypatch.setattr(train.time, "sleep", sleep)
    with pytest.raises(Slept):
        train.inject_failure("hang", 1, 4)
    assert "debug hang injected: rank 1 at global_step 4 (debug.fail_mode=hang)" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="debug failure injected: rank 1 at global_step 4"):
        train.inject_failure("raise", 1, 4)


def test_compute_time_covers_forward_backward_and_optimizer_up_to_the_gradient_all_reduce():
    """The DDP communication hook marks each gradient bucket as it is ready: the backward's segment ends at the last
    mark (the rank's own gradients done), not after what follows (the wait for the other ranks, here a sleep); a
    backward under no_sync (the accumulated shards) has no all-reduce and no mark: its segment goes on to its end."""
    torch, dist = train.torch, train.dist
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
        ddp = train.DDP(model)
        timer = train.ComputeTimer(torch.device("cpu"))
        timer.watch(ddp)
        timer.begin()
        with ddp.no_sync():
            ddp(torch.ones(2, 8)).sum().backward()
        assert timer.marked is None            # no all-reduce, no mark
        time.sleep(0.3)
        timer.end()
        assert timer.take() >= 0.3
        for _step in range(2):                 # DDP rebuilds its buckets after the first step
            timer.begin()
            ddp(torch.ones(2, 8)).sum().backward()
            assert timer.marked is not None
            time.sleep(0.3)                    # after the last bucket: left out
            timer.end()
            assert timer.take() < 0.2
    finally:
        dist.destroy_process_group()


def test_fail_mode_takes_only_raise_or_hang():
    with pytest.raises(train.ConfigError, match="fail_mode"):
        train.load_config(None, ["debug.fail_mode=explode"])


# ---------------------------------------------------------------------------------------------
# torch.profiler (-e profile=torch: the launcher's wrapper sets TRAINOPS_PROFILE_TRACE for a rank)
# ---------------------------------------------------------------------------------------------

def test_profiled_rank_writes_a_chrome_trace_of_its_steps(tmp_path):
    out_dir = tmp_path / "out"
    trace = tmp_path / "profiles" / "node0_rank0.json"
    proc = subprocess.run([sys.executable, TRAIN, "--override", "training.output_dir=%s" % out_dir]
                          + ["--override=%s" % o for o in TINY],
                          env=child_env(TRAINOPS_PROFILE_TRACE=str(trace)), cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=RUN_TIMEOUT,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "[trainops] profile written: %s" % trace in proc.stdout
    data = json.load(open(str(trace)))
    steps = sorted({e["name"] for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")})
    assert len(steps) == train.PROFILE_ACTIVE_STEPS, steps
    # real operators of the training step, not just the step markers
    names = {e.get("name") for e in data["traceEvents"]}
    assert any("addmm" in str(n) or "mm" == n for n in names) and any("backward" in str(n).lower() for n in names)
    assert not os.path.exists(str(trace) + ".tmp")


def test_unprofiled_rank_writes_no_trace(tmp_path):
    profiler = train.StepProfiler("", None)
    profiler.start()
    profiler.step()
    profiler.stop()
    assert profiler.profiler is None and not profiler.exported
