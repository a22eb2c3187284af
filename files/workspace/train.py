#!/usr/bin/env python
"""Synthetic-but-real DDP training workload for ``trainops.multinode``.

Launched by ``torchrun`` on every node. A student network (a residual MLP or a small
pre-LN transformer) learns to imitate a fixed, randomly initialised "teacher" on
synthetic data, so the loss goes down reliably while the run does real GEMM work,
real gradient all-reduces, checkpointing and resuming.

Device and collective backend are picked automatically (CUDA or ROCm -> ``nccl``,
which is RCCL on ROCm; CPU -> ``gloo``) and can be forced from the config.

Outputs, all under ``training.output_dir``:

* ``rank_XX_metrics.jsonl`` - one JSON record per logged step, per rank.

Resumed on another world size (a retry on fewer nodes), the run keeps its global batch through gradient
accumulation where the new world size divides the checkpoint's, and its epochs and learning-rate schedule on the
global step (:func:`data_parallel_plan`).
* ``rank_XX_env.json`` - once per rank: host, ranks, backend, versions, NCCL/RCCL/GLOO/... variables.
* ``checkpoint.pt`` - written atomically on every node (by its local rank 0: the same state everywhere, so the
  checkpoint survives the loss of any node) at every epoch end, at the end, every
  ``training.checkpoint_interval`` steps and when the checkpoint signal arrives (below). Nodes that share one
  output directory (shared storage) write the same file safely: each writer renames its own temp file over it.
* ``checkpoint.json`` - the node's (its local rank 0's) record of the last ``checkpoint.pt``: ``global_step``, ``epoch``, ``reason``
  (``epoch_end``, ``interval``, ``signal``, ``end``), ``signal``, ``path``, ``time``, and
  ``last_signal_checkpoint`` (the same keys, of the last checkpoint the signal caused; null when none).

The checkpoint signal (``TRAINOPS_CHECKPOINT_SIGNAL``, default ``SIGUSR1``: what Slurm's ``--signal=USR1@90``
sends every process of a job before its time limit) does not stop the run: every rank notes it, all ranks
agree at the next step boundary (an all-reduce of the flag), every node writes ``checkpoint.pt`` as at an epoch
end, and every rank logs ``[trainops] checkpoint at global step N on SIGUSR1 node=<host> rank=<r>/<world>``.
Training then goes on until the end or the time limit.

Progress goes to stdout (local rank 0 of every node) in a fixed, machine-parsed format::

    [trainops] node=<host> rank=<rank>/<world> epoch=<e> step=<global_step>/<total_steps> loss=<loss:.4f> samples_per_s=<x:.1f>
    [trainops] done node=<host> rank=<rank>/<world> final_loss=<loss:.4f>

Usage::

    torchrun --nnodes N --nproc-per-node P ... train.py [--config PATH] [--override KEY=VALUE ...]

Without torchrun (no ``RANK`` in the environment) it runs as a single process, world size 1.
"""

import argparse
import contextlib
import copy
import datetime
import itertools
import json
import logging
import math
import os
import platform
import re
import signal
import socket
import sys
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn
import torch.nn.functional as F
import yaml
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

LOG = logging.getLogger("trainops.train")

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG_PATH = os.path.join(SCRIPT_DIR, "config", "default.yaml")
CHECKPOINT_NAME = "checkpoint.pt"
CHECKPOINT_RECORD_NAME = "checkpoint.json"
CHECKPOINT_FORMAT = 1
CHECKPOINT_SIGNAL_ENV = "TRAINOPS_CHECKPOINT_SIGNAL"
DEFAULT_CHECKPOINT_SIGNAL = "SIGUSR1"
PROGRESS_PREFIX = "[trainops]"

#: Every config key with its default. ``config/default.yaml`` mirrors this; a key not listed here is an error.
DEFAULTS = {
    "model": {
        "type": "mlp",         # mlp | transformer
        "in_dim": 128,         # input features (per token for the transformer)
        "hidden": 256,         # residual width (d_model for the transformer)
        "depth": 4,            # residual blocks
        "mlp_ratio": 4,        # inner width of every MLP = hidden * mlp_ratio
        "out_dim": 16,         # regression targets
        "heads": 4,            # transformer only
        "seq_len": 16,         # transformer only
    },
    "data": {
        "num_samples": 8192,   # size of the synthetic data set (shared by all ranks, split by DistributedSampler)
        "teacher_hidden": 64,  # width of the fixed random teacher network
        "noise": 0.01,         # std of Gaussian noise added to the teacher's targets
        "seed": 1234,          # data and teacher seed (identical on every rank)
    },
    "training": {
        "epochs": 3,
        "batch_size": 64,      # per rank
        "max_steps": None,     # optional cap on the total number of optimizer steps
        "lr": 0.001,           # peak AdamW learning rate
        "min_lr_ratio": 0.1,   # cosine decay floor, as a fraction of lr
        "warmup_steps": 10,
        "weight_decay": 0.01,
        "grad_clip": 1.0,      # max global grad norm; 0 disables clipping (the norm is still reported)
        "bf16": True,          # bf16 autocast, GPU only (ignored on CPU)
        "compile": False,      # torch.compile the DDP model (fuses the elementwise work between the GEMMs)
        "log_interval": 10,    # log every N global steps (plus the first and the last step)
        "checkpoint_interval": 0,  # extra checkpoint every N global steps; 0 = only at epoch ends and the end
        "output_dir": "outputs",
        "resume": False,       # resume from <output_dir>/checkpoint.pt when one exists
        "seed": 0,             # model init seed
    },
    "distributed": {
        "backend": "auto",     # auto (cuda -> nccl, which is RCCL on ROCm; cpu -> gloo) | nccl | gloo | mpi | ucc
        "device": "auto",      # auto | cuda | cpu
        "timeout_s": 120,      # process-group timeout: a lost peer fails the job instead of hanging
    },
    "debug": {
        "fail_rank": None,     # with fail_step: this global rank raises RuntimeError ...
        "fail_step": None,     # ... when it is about to run this global step (1-based)
        "fail_mode": "raise",  # raise (the rank crashes) | hang (the rank sleeps forever, outside any collective)
        "sleep_per_step_s": 0.0,  # sleep after every step (not counted in step_time_s) to make runs longer
        "slow_node_rank": None,   # with slow_step_s: every rank of this node (group rank) is slower ...
        "slow_step_s": 0.0,       # ... by this many seconds of every step, counted in its compute_time_s (a straggler)
        "slow_local_rank": None,  # with slow_node_rank: only this local rank of that node is slower (one slow GPU)
    },
}

#: Keys whose default is None, with the type a non-null value must have.
_NULLABLE_TYPES = {
    "training.max_steps": int,
    "debug.fail_rank": int,
    "debug.fail_step": int,
    "debug.slow_node_rank": int,
    "debug.slow_local_rank": int,
}

_CHOICES = {
    "model.type": ("mlp", "transformer"),
    "distributed.backend": ("auto", "nccl", "gloo", "mpi", "ucc"),
    "distributed.device": ("auto", "cuda", "cpu"),
    "debug.fail_mode": ("raise", "hang"),
}

#: Names never recorded, whatever their prefix: they look like credentials.
SECRET_NAME_RE = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL", re.IGNORECASE)

#: Environment variable prefixes recorded in ``rank_XX_env.json``.
ENV_PREFIXES = ("NCCL_", "RCCL_", "GLOO_", "HSA_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "TORCHELASTIC_",
                "UCX_", "FI_", "HIP_", "ROCR_", "CUDA_", "OMP_", "TRAINOPS_")


#: Variables of the process environment recorded in ``rank_XX_env.json`` (``process_env``) whatever their prefix.
PROCESS_ENV_NAMES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "HOME", "USER", "VIRTUAL_ENV", "CONDA_PREFIX")


class ConfigError(ValueError):
    """Invalid config file, override or config value."""


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------

def _check_value(dotted: str, default: Any, value: Any) -> Any:
    """Return ``value`` converted to the type of ``default`` or raise :class:`ConfigError`."""
    if default is None:
        expected = _NULLABLE_TYPES.get(dotted)
        if value is None or expected is None:
            return value
        default = expected(0)
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        raise ConfigError("config key %s must be true or false, got %r" % (dotted, value))
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError("config key %s must be an integer, got %r" % (dotted, value))
    if isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # PyYAML reads "1e-3" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError("config key %s must be a number, got %r" % (dotted, value))
    if isinstance(default, str):
        if isinstance(value, str):
            return value
        raise ConfigError("config key %s must be a string, got %r" % (dotted, value))
    raise ConfigError("config key %s has an unsupported type" % dotted)  # pragma: no cover


def _merge(base: Dict[str, Any], update: Dict[str, Any], schema: Dict[str, Any], prefix: str = "") -> None:
    """Merge ``update`` into ``base`` in place, checking every key and value against ``schema``."""
    for key, value in update.items():
        dotted = prefix + str(key)
        if key not in schema:
            known = ", ".join(sorted(schema))
            raise ConfigError("unknown config key %r (known keys%s: %s)" % (dotted, " in %r" % prefix[:-1] if prefix else "", known))
        if isinstance(value, dict) and not isinstance(schema[key], dict):
            raise ConfigError("config key %r is a value, not a section" % dotted)
        if isinstance(schema[key], dict):
            if not isinstance(value, dict):
                raise ConfigError("config key %r is a section; set its keys (e.g. %s.%s=...)" % (dotted, dotted, next(iter(schema[key]))))
            _merge(base[key], value, schema[key], dotted + ".")
        else:
            base[key] = _check_value(dotted, schema[key], value)


def parse_override(text: str) -> Tuple[List[str], Any]:
    """Parse one ``--override`` argument ``a.b.c=value`` into ``(["a", "b", "c"], value)``.

    The value is parsed as a YAML scalar (``512`` -> int, ``true`` -> bool, ``null`` -> None, ``/x`` -> str).
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    parts = key.split(".")
    if not sep or not key or any(not p.strip() for p in parts):
        raise ConfigError("invalid --override %r: expected KEY=VALUE with a dotted key, e.g. training.lr=0.01" % text)
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError("invalid --override %r: value is not valid YAML: %s" % (text, exc))
    if isinstance(value, (dict, list)):
        raise ConfigError("invalid --override %r: value must be a scalar, not a %s" % (text, type(value).__name__))
    return [p.strip() for p in parts], value


def validate_config(cfg: Dict[str, Any]) -> None:
    """Check value ranges and combinations that the per-key type check cannot."""
    for dotted, choices in _CHOICES.items():
        section, key = dotted.split(".")
        if cfg[section][key] not in choices:
            raise ConfigError("config key %s must be one of %s, got %r" % (dotted, "|".join(choices), cfg[section][key]))
    positive = ("model.in_dim", "model.hidden", "model.depth", "model.mlp_ratio", "model.out_dim", "model.heads", "model.seq_len",
                "data.num_samples", "data.teacher_hidden", "training.epochs", "training.batch_size", "training.log_interval")
    for dotted in positive:
        section, key = dotted.split(".")
        if cfg[section][key] <= 0:
            raise ConfigError("config key %s must be > 0, got %r" % (dotted, cfg[section][key]))
    non_negative = ("data.noise", "training.lr", "training.min_lr_ratio", "training.warmup_steps", "training.weight_decay",
                    "training.grad_clip", "training.checkpoint_interval", "debug.sleep_per_step_s",
                    "debug.slow_step_s")
    for dotted in non_negative:
        section, key = dotted.split(".")
        if cfg[section][key] < 0:
            raise ConfigError("config key %s must be >= 0, got %r" % (dotted, cfg[section][key]))
    if cfg["training"]["max_steps"] is not None and cfg["training"]["max_steps"] <= 0:
        raise ConfigError("config key training.max_steps must be > 0 or null, got %r" % cfg["training"]["max_steps"])
    if cfg["distributed"]["timeout_s"] <= 0:
        raise ConfigError("config key distributed.timeout_s must be > 0")
    if cfg["model"]["type"] == "transformer" and cfg["model"]["hidden"] % cfg["model"]["heads"]:
        raise ConfigError("model.hidden (%d) must be divisible by model.heads (%d)" % (cfg["model"]["hidden"], cfg["model"]["heads"]))
    if (cfg["debug"]["fail_rank"] is None) != (cfg["debug"]["fail_step"] is None):
        raise ConfigError("debug.fail_rank and debug.fail_step must be set together")
    if cfg["debug"]["slow_node_rank"] is not None and cfg["debug"]["slow_node_rank"] < 0:
        raise ConfigError("config key debug.slow_node_rank must be >= 0 or null, got %r" % cfg["debug"]["slow_node_rank"])
    if cfg["debug"]["slow_node_rank"] is None and cfg["debug"]["slow_step_s"]:
        raise ConfigError("debug.slow_step_s needs debug.slow_node_rank (the node to slow down)")
    if cfg["debug"]["slow_local_rank"] is not None and (cfg["debug"]["slow_local_rank"] < 0 or cfg["debug"]["slow_node_rank"] is None):
        raise ConfigError("debug.slow_local_rank must be >= 0 and needs debug.slow_node_rank (the node of the rank to slow down)")
    if not cfg["training"]["output_dir"]:
        raise ConfigError("training.output_dir must not be empty")


def load_config(path: Optional[str] = None, overrides: Iterable[str] = ()) -> Dict[str, Any]:
    """Return the defaults, updated by the YAML file at ``path`` (if any), then by the launcher's
    ``TRAINOPS_COLLECTIVE_TIMEOUT_S`` (distributed.timeout_s), then by ``overrides``.

    Raises :class:`ConfigError` for unreadable files, unknown keys, wrongly typed or out-of-range values.
    """
    cfg = copy.deepcopy(DEFAULTS)
    if path is not None:
        try:
            with open(path, encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        except OSError as exc:
            raise ConfigError("cannot read config file %s: %s" % (path, exc))
        except yaml.YAMLError as exc:
            raise ConfigError("config file %s is not valid YAML: %s" % (path, exc))
        if data is not None:
            if not isinstance(data, dict):
                raise ConfigError("config file %s must contain a mapping at the top level" % path)
            _merge(cfg, data, DEFAULTS)
    # the launcher's collective timeout (trainops_collective_timeout) sits between the file and --override
    launcher_timeout = os.environ.get("TRAINOPS_COLLECTIVE_TIMEOUT_S")
    if launcher_timeout:
        try:
            cfg["distributed"]["timeout_s"] = float(launcher_timeout)
        except ValueError:
            raise ConfigError("TRAINOPS_COLLECTIVE_TIMEOUT_S=%r is not a number of seconds" % launcher_timeout)
    for text in overrides:
        parts, value = parse_override(text)
        nested = value  # type: Any
        for part in reversed(parts):
            nested = {part: nested}
        _merge(cfg, nested, DEFAULTS)
    validate_config(cfg)
    return cfg


def build_arg_parser() -> argparse.ArgumentParser:
    """The command line: ``--config``, ``--override`` (repeatable, several values each) and ``--print-config``."""
    parser = argparse.ArgumentParser(
        description="trainops.multinode DDP training workload (launch with torchrun).",
        epilog="Example: torchrun --nproc-per-node 4 train.py --override training.output_dir=/tmp/run model.hidden=256",
    )
    parser.add_argument("--config", default=DEFAULT_CONFIG_PATH,
                        help="YAML config file (default: %(default)s)")
    parser.add_argument("--override", action="append", nargs="+", default=[], metavar="KEY=VALUE",
                        help="set a config value with a dotted key, value parsed as YAML, e.g. training.lr=0.01; repeatable")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config as YAML and exit")
    return parser


# --------------------------------------------------------------------------------------------------
# Data and models
# --------------------------------------------------------------------------------------------------

class TeacherDataset(Dataset):
    """Synthetic regression data: Gaussian inputs, targets from a fixed random two-layer teacher.

    The whole set is generated from ``seed`` at construction, so every rank holds the same data and
    :class:`~torch.utils.data.distributed.DistributedSampler` splits it. Targets are standardised, so
    a model that predicts zeros has an MSE of about 1.
    """

    def __init__(self, num_samples: int, in_dim: int, out_dim: int, teacher_hidden: int, noise: float, seed: int,
                 seq_len: Optional[int] = None) -> None:
        gen = torch.Generator().manual_seed(seed)
        shape = (num_samples, seq_len, in_dim) if seq_len else (num_samples, in_dim)
        self.inputs = torch.randn(shape, generator=gen)
        w1 = torch.randn(in_dim, teacher_hidden, generator=gen) / math.sqrt(in_dim)
        w2 = torch.randn(teacher_hidden, out_dim, generator=gen) / math.sqrt(teacher_hidden)
        hidden = torch.tanh(self.inputs @ w1)
        if seq_len:  # token features pooled over the sequence, mixed by a second non-linearity
            hidden = torch.tanh(hidden.mean(dim=1) * math.sqrt(seq_len))
        targets = hidden @ w2
        targets = (targets - targets.mean(dim=0)) / targets.std(dim=0).clamp_min(1e-6)
        self.targets = targets + noise * torch.randn(targets.shape, generator=gen)

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[index], self.targets[index]


class MLPBlock(nn.Module):
    """Pre-LayerNorm residual MLP block: ``x + W2 gelu(W1 ln(x))``."""

    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, inner)
        self.fc2 = nn.Linear(inner, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class AttentionBlock(nn.Module):
    """Pre-LayerNorm transformer block: multi-head self-attention then an MLP, both residual."""

    def __init__(self, hidden: int, heads: int, inner: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.mlp = MLPBlock(hidden, inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        qkv = self.qkv(self.norm1(x)).view(batch, seq, 3, self.heads, hidden // self.heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, hidden))
        return self.mlp(x)


class StudentMLP(nn.Module):
    """Residual MLP: input projection, ``depth`` :class:`MLPBlock` s, LayerNorm and output head."""

    def __init__(self, in_dim: int, hidden: int, depth: int, mlp_ratio: int, out_dim: int) -> None:
        super().__init__()
        self.dims = (in_dim, hidden, depth, hidden * mlp_ratio, out_dim)
        self.inp = nn.Linear(in_dim, hidden)
        self.blocks = nn.Sequential(*[MLPBlock(hidden, hidden * mlp_ratio) for _block in range(depth)])
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.inp(x))))

    def forward_flops_per_sample(self) -> int:
        """Matmul FLOPs (2 per multiply-add) of one forward pass for one sample."""
        in_dim, hidden, depth, inner, out_dim = self.dims
        return 2 * (in_dim * hidden + depth * 2 * hidden * inner + hidden * out_dim)

    def input_projection_flops_per_sample(self) -> int:
        """Forward FLOPs of the first layer, whose input gradient is never computed in backward."""
        return 2 * self.dims[0] * self.dims[1]


class StudentTransformer(nn.Module):
    """Small pre-LN transformer encoder over ``seq_len`` tokens, mean-pooled into a regression head."""

    def __init__(self, in_dim: int, hidden: int, depth: int, mlp_ratio: int, out_dim: int, heads: int, seq_len: int) -> None:
        super().__init__()
        self.dims = (in_dim, hidden, depth, hidden * mlp_ratio, out_dim, seq_len)
        self.inp = nn.Linear(in_dim, hidden)
        self.pos = nn.Parameter(torch.zeros(seq_len, hidden))
        self.blocks = nn.Sequential(*[AttentionBlock(hidden, heads, hidden * mlp_ratio) for _block in range(depth)])
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.inp(x) + self.pos).mean(dim=1)))

    def forward_flops_per_sample(self) -> int:
        """Matmul FLOPs of one forward pass for one sample (projections, MLPs, QK^T and AV, head)."""
        in_dim, hidden, depth, inner, out_dim, seq = self.dims
        per_token = in_dim * hidden + depth * (3 * hidden * hidden + hidden * hidden + 2 * hidden * inner)
        attention = depth * 2 * seq * seq * hidden  # QK^T and AV, summed over heads
        return 2 * (seq * per_token + attention + hidden * out_dim)

    def input_projection_flops_per_sample(self) -> int:
        """Forward FLOPs of the first layer, whose input gradient is never computed in backward."""
        return 2 * self.dims[5] * self.dims[0] * self.dims[1]


def build_model(model_cfg: Dict[str, Any]) -> nn.Module:
    """Instantiate the student described by the ``model`` config section."""
    if model_cfg["type"] == "transformer":
        return StudentTransformer(model_cfg["in_dim"], model_cfg["hidden"], model_cfg["depth"], model_cfg["mlp_ratio"],
                                  model_cfg["out_dim"], model_cfg["heads"], model_cfg["seq_len"])
    return StudentMLP(model_cfg["in_dim"], model_cfg["hidden"], model_cfg["depth"], model_cfg["mlp_ratio"], model_cfg["out_dim"])


def train_flops_per_sample(model: nn.Module) -> int:
    """Matmul FLOPs of one training step per sample: forward + backward (2x forward, minus the input dgrad)."""
    forward = model.forward_flops_per_sample()
    return 3 * forward - model.input_projection_flops_per_sample()


def build_dataset(cfg: Dict[str, Any]) -> TeacherDataset:
    """The synthetic data set matching the model config."""
    model_cfg, data_cfg = cfg["model"], cfg["data"]
    return TeacherDataset(data_cfg["num_samples"], model_cfg["in_dim"], model_cfg["out_dim"], data_cfg["teacher_hidden"],
                          data_cfg["noise"], data_cfg["seed"], model_cfg["seq_len"] if model_cfg["type"] == "transformer" else None)


def lr_lambda_factory(warmup_steps: int, total_steps: int, min_ratio: float):
    """Linear warmup to 1, then cosine decay to ``min_ratio``, as a multiplier of the peak lr (0-based step)."""
    def factor(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        span = max(1, total_steps - warmup_steps)
        progress = min(1.0, (step - warmup_steps) / span)
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return factor


def _whole_number(value: Any) -> Optional[int]:
    """``value`` as an int > 0 (a checkpoint's recorded count), None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def data_parallel_plan(world_size: int, num_samples: int, batch_size: int,
                       resumed: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """How this run splits its global batch over ``world_size`` ranks, keeping the run it resumes (its checkpoint,
    ``resumed``) the same where it can.

    A checkpoint records ``data_world_size``: how many per-rank batches made one optimizer step (world size x gradient
    accumulation; older checkpoints: their ``world_size``), and ``steps_per_epoch``. Resumed on a world size that
    divides it (4 -> 2 nodes), each rank accumulates the gradients of ``data_world_size / world_size`` batches: the
    global batch, the samples of every step, the steps per epoch, the total steps and the learning-rate schedule (on
    the global step) stay those of the run it resumes. Otherwise (4 -> 3) the accumulation is the whole part of the
    ratio (at least 1), the global batch changes, and ``note`` says so; the epochs and the schedule stay on the global
    step (``steps_per_epoch`` from the checkpoint, fewer where the new split has fewer batches per epoch).

    Returns ``world_size``, ``previous_world_size`` (the checkpoint's, None from scratch), ``accumulation_steps``,
    ``replicas`` (world size x accumulation: the data is split into this many shards, rank r taking shards
    r x accumulation ... + accumulation - 1), ``global_batch``, ``previous_global_batch``, ``global_batch_kept``,
    ``steps_per_epoch`` and ``note`` (None, or a line for the log).
    """
    previous = data_world = spe = None
    if resumed is not None:
        previous = _whole_number(resumed.get("world_size"))
        data_world = _whole_number(resumed.get("data_world_size")) or previous
        spe = _whole_number(resumed.get("steps_per_epoch"))
    data_world = data_world or world_size
    kept = data_world % world_size == 0
    accumulation = max(1, data_world // world_size)
    replicas = world_size * accumulation
    # DistributedSampler(drop_last=True) gives each shard num_samples // replicas samples
    loader_steps = (num_samples // replicas) // batch_size
    spe = min(spe or (num_samples // data_world) // batch_size, loader_steps)
    plan = {"world_size": world_size, "previous_world_size": previous, "accumulation_steps": accumulation,
            "replicas": replicas, "global_batch": replicas * batch_size, "previous_global_batch": data_world * batch_size,
            "global_batch_kept": kept, "steps_per_epoch": spe, "note": None}
    if resumed is None or (previous == world_size and kept and accumulation == 1):
        return plan
    if kept:
        plan["note"] = ("resumed on world size %d (was %s): gradient accumulation %d keeps the global batch of %d samples"
                        % (world_size, previous, accumulation, replicas * batch_size))
    else:
        plan["note"] = ("resumed on world size %d (was %s): the global batch CHANGES from %d to %d samples (%d batches "
                        "per step are no multiple of %d ranks; gradient accumulation %d); the learning-rate schedule "
                        "and the epochs stay on the global step" % (world_size, previous, data_world * batch_size,
                                                                    replicas * batch_size, data_world, world_size,
                                                                    accumulation))
    return plan


# --------------------------------------------------------------------------------------------------
# Distributed plumbing
# --------------------------------------------------------------------------------------------------

def dist_env() -> Dict[str, Any]:
    """Rank information from torchrun's environment (single-process defaults when it is absent)."""
    env = os.environ
    rank = int(env.get("RANK", "0"))
    world_size = int(env.get("WORLD_SIZE", "1"))
    local_rank = int(env.get("LOCAL_RANK", "0"))
    return {
        "launched": "RANK" in env,
        "rank": rank,
        "world_size": world_size,
        "local_rank": local_rank,
        "local_world_size": int(env.get("LOCAL_WORLD_SIZE", "1")),
        "group_rank": int(env.get("GROUP_RANK", "0")),
        "master_addr": env.get("MASTER_ADDR"),
        "master_port": env.get("MASTER_PORT"),
    }


def select_device(device_cfg: str, local_rank: int) -> torch.device:
    """``cuda:<local_rank>`` when requested or available (CUDA or ROCm), otherwise ``cpu``."""
    if device_cfg == "cpu" or (device_cfg == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("distributed.device=cuda but torch.cuda.is_available() is False (torch %s)" % torch.__version__)
    count = torch.cuda.device_count()
    if local_rank >= count:
        raise RuntimeError("LOCAL_RANK=%d but only %d GPU(s) are visible on %s; lower --nproc-per-node" % (local_rank, count, socket.gethostname()))
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def accelerator_name(device: torch.device) -> str:
    """``rocm``, ``cuda`` or ``cpu``."""
    if device.type != "cuda":
        return "cpu"
    return "rocm" if getattr(torch.version, "hip", None) else "cuda"


def select_backend(backend_cfg: str, device: torch.device) -> str:
    """``nccl`` for GPUs (RCCL on ROCm builds), ``gloo`` for CPU, unless the config forces one."""
    if backend_cfg != "auto":
        return backend_cfg
    return "nccl" if device.type == "cuda" else "gloo"


def init_distributed(backend: str, device: torch.device, timeout_s: float, info: Dict[str, Any]) -> None:
    """``init_process_group`` with the configured timeout, from torchrun's env or as a 1-process group."""
    kwargs = {"backend": backend, "timeout": datetime.timedelta(seconds=timeout_s)}  # type: Dict[str, Any]
    if backend == "nccl" and device.type == "cuda":
        kwargs["device_id"] = device  # binds the communicator to this rank's GPU (torch >= 2.3)
    if info["launched"]:
        kwargs.update(init_method="env://", rank=info["rank"], world_size=info["world_size"])
    else:
        kwargs.update(store=dist.HashStore(), rank=0, world_size=1)
    try:
        dist.init_process_group(**kwargs)
    except TypeError:
        if "device_id" not in kwargs:
            raise
        del kwargs["device_id"]
        dist.init_process_group(**kwargs)


def nccl_version() -> Optional[str]:
    """Version of the NCCL (RCCL on ROCm) library torch was built with, or None if it cannot be told."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - purely informational
        return None
    return ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)


def collected_env() -> Dict[str, str]:
    """Communication-related environment variables (NCCL_*, RCCL_*, GLOO_*, HSA_*, TORCH_NCCL_*, ...).

    Secret variables (named in TRAINOPS_SECRET_ENV_NAMES by the launcher) are never recorded, whatever their prefix.
    """
    secret = set(secret_env_names())
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(ENV_PREFIXES) and k not in secret and not SECRET_NAME_RE.search(k)}


def secret_env_names() -> List[str]:
    """The names of the secret variables the launcher gave this rank (TRAINOPS_SECRET_ENV_NAMES)."""
    return sorted(filter(None, os.environ.get("TRAINOPS_SECRET_ENV_NAMES", "").split(",")))


def secret_env_presence() -> Dict[str, bool]:
    """Whether each secret variable reached this rank, never its value."""
    return {name: bool(os.environ.get(name)) for name in secret_env_names()}


def write_json_atomic(path: str, data: Any) -> None:
    """Write ``data`` as pretty JSON via a temp file of this writer (:func:`temp_path`) and ``os.replace``."""
    tmp = temp_path(path)
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True, default=str)
        handle.write("\n")
    os.replace(tmp, path)


def temp_path(path: str) -> str:
    """A temp file next to ``path`` that no other writer uses: the host name and the process id, since nodes that
    share one output directory (shared storage) write the same checkpoint at the same step."""
    return "%s.tmp.%s.%d" % (path, socket.gethostname(), os.getpid())


def save_checkpoint(path: str, state: Dict[str, Any]) -> None:
    """``torch.save`` to a temp file of this writer in the same directory (:func:`temp_path`), fsync, then atomically
    rename over ``path``: a reader sees the old or the new checkpoint, never a part of one."""
    tmp = temp_path(path)
    with open(tmp, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class CheckpointSignal:
    """The checkpoint signal (``TRAINOPS_CHECKPOINT_SIGNAL``: ``USR1``/``SIGUSR2``, default ``SIGUSR1``): its handler
    only sets a flag (a second signal before the checkpoint changes nothing); :meth:`agreed` tells every rank,
    at a step boundary, whether any rank got it since the last checkpoint."""

    def __init__(self, environ: Optional[Dict[str, str]] = None) -> None:
        name = ((environ if environ is not None else os.environ).get(CHECKPOINT_SIGNAL_ENV) or DEFAULT_CHECKPOINT_SIGNAL)
        name = name.strip().upper()
        self.name = name if name.startswith("SIG") else "SIG" + name
        self.signum = getattr(signal, self.name, None)
        if self.name not in ("SIGUSR1", "SIGUSR2") or self.signum is None:
            raise ValueError("%s=%r is not a checkpoint signal (USR1 or USR2)" % (CHECKPOINT_SIGNAL_ENV, name))
        self.pending = False

    def install(self) -> None:
        signal.signal(self.signum, self._handler)

    def _handler(self, signum: int, frame: Any) -> None:  # pylint: disable=unused-argument
        self.pending = True

    def agreed(self, device: torch.device) -> bool:
        """True on every rank when any rank got the signal since the last call that returned True (collective)."""
        flag = torch.tensor([1 if self.pending else 0], dtype=torch.int32, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if int(flag.item()):
            self.pending = False
            return True
        return False


def _torch_load(path: str) -> Dict[str, Any]:
    """Load a checkpoint onto the CPU (tensors only and plain containers where torch supports ``weights_only``)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13
        return torch.load(path, map_location="cpu")


def load_checkpoint_collective(path: str, rank: int, world_size: int) -> Optional[Dict[str, Any]]:
    """Return the newest checkpoint any rank can read, on every rank; None when no rank has one.

    Every rank looks for ``path`` (a shared file system makes that all of them); the rank holding the
    highest ``global_step`` broadcasts its copy, so resuming also works when only one node has the file.
    """
    local = None
    if os.path.isfile(path):
        local = _torch_load(path)
        if local.get("format") != CHECKPOINT_FORMAT:
            raise RuntimeError("%s has checkpoint format %r, expected %r" % (path, local.get("format"), CHECKPOINT_FORMAT))
    steps = [None] * world_size  # type: List[Any]
    dist.all_gather_object(steps, local["global_step"] if local is not None else -1)
    best = max(steps)
    if best < 0:
        return None
    source = steps.index(best)
    if world_size == 1:
        return local
    box = [local if rank == source else None]  # CPU tensors pickle fine; receivers need no file access
    dist.broadcast_object_list(box, src=source)
    return box[0]


# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------

#: Set by the launcher's per-rank profile wrapper (roles/job/files/profile_rank.py, -e profile=torch) for a
#: selected rank: the Chrome trace file torch.profiler writes for that rank.
PROFILE_TRACE_ENV = "TRAINOPS_PROFILE_TRACE"
#: Steps torch.profiler records (after 1 step skipped and 1 step of warm-up).
PROFILE_ACTIVE_STEPS = 5


class ComputeTimer:
    """A rank's own time per step: the forward pass, the backward pass and the optimizer step, without the time this
    rank waits for slower ranks, so a slow rank shows a longer time than the others (the metrics' ``compute_time_s``;
    a step's wall time, ``step_time_s``, is the same on every rank of a synchronous job).

    DDP all-reduces the gradients bucket by bucket during the backward and the backward's end waits until every rank's
    buckets are in: :meth:`watch` registers a DDP communication hook (the default all-reduce) that marks the moment
    each bucket is ready, and a segment that :meth:`end` closes after a backward ends at the last mark (the moment
    this rank's own gradients were all computed). Segments without a mark end at :meth:`end`. On a GPU the times are
    CUDA events on the compute stream (the host only queues the kernels)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.seconds = 0.0
        self.events: List[Any] = []
        self.started: Any = None
        self.marked: Any = None

    def _now(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def watch(self, ddp: DDP) -> None:
        """Mark every gradient bucket's start of all-reduce (``ddp``'s communication hook, the default all-reduce)."""
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # pylint: disable=import-outside-toplevel

        def marked_allreduce(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
            self.mark()
            return default_hooks.allreduce_hook(state, bucket)
        ddp.register_comm_hook(None, marked_allreduce)

    def begin(self) -> None:
        self.started, self.marked = self._now(), None

    def mark(self) -> None:
        """The open segment's end so far (a later mark moves it)."""
        if self.started is not None:
            self.marked = self._now()

    def end(self) -> None:
        """Close the open segment at its last mark, else now."""
        if self.started is None:
            return
        stop = self.marked if self.marked is not None else self._now()
        if self.cuda:
            self.events.append((self.started, stop))
        else:
            self.seconds += stop - self.started
        self.started = self.marked = None

    def take(self) -> float:
        """The seconds measured since the last take (waits for the last CUDA event), and start again."""
        if self.events:
            self.events[-1][1].synchronize()
            self.seconds += sum(start.elapsed_time(stop) for start, stop in self.events) / 1000.0
            self.events = []
        seconds, self.seconds = self.seconds, 0.0
        return seconds


class StepProfiler:
    """torch.profiler over a few training steps of this rank, exported as a Chrome trace to ``trace_path``.

    Nothing happens when ``trace_path`` is empty (the rank is not profiled). The schedule skips one step,
    warms up one and records :data:`PROFILE_ACTIVE_STEPS`; a run that ends earlier is exported as it stands.
    """

    def __init__(self, trace_path: Optional[str], device: torch.device) -> None:
        self.trace_path = trace_path or None
        self.device = device
        self.profiler = None
        self.exported = False

    def start(self) -> None:
        if not self.trace_path:
            return
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.profiler = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(wait=1, warmup=1, active=PROFILE_ACTIVE_STEPS, repeat=1),
            on_trace_ready=self._export)
        self.profiler.start()

    def step(self) -> None:
        if self.profiler is not None:
            self.profiler.step()

    def stop(self) -> None:
        if self.profiler is not None:
            self.profiler.stop()
            self.profiler = None

    def _export(self, prof: Any) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.trace_path)), exist_ok=True)
        tmp = self.trace_path + ".tmp"
        prof.export_chrome_trace(tmp)
        os.replace(tmp, self.trace_path)
        self.exported = True
        emit("[trainops] profile written: %s" % self.trace_path)


def emit(line: str) -> None:
    """Write one whole line to stdout in a single write(2).

    The ranks of a node share torchrun's stdout; print() may write the text and the newline
    separately (unbuffered Python), so lines of different ranks could interleave mid-line.
    """
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (line + "\n").encode("utf-8", "replace"))


def progress_line(node: str, rank: int, world_size: int, epoch: int, global_step: int, total_steps: int, loss: float,
                  samples_per_s: float) -> str:
    """The progress line other components parse. Do not change its format."""
    return "%s node=%s rank=%d/%d epoch=%d step=%d/%d loss=%.4f samples_per_s=%.1f" % (
        PROGRESS_PREFIX, node, rank, world_size, epoch, global_step, total_steps, loss, samples_per_s)


def done_line(node: str, rank: int, world_size: int, final_loss: float) -> str:
    """The final line printed by every rank. Do not change its format."""
    return "%s done node=%s rank=%d/%d final_loss=%.4f" % (PROGRESS_PREFIX, node, rank, world_size, final_loss)


def checkpoint_line(node: str, rank: int, world_size: int, global_step: int, signal_name: str) -> str:
    """The line every rank prints when it took part in a checkpoint on the checkpoint signal."""
    return "%s checkpoint at global step %d on %s node=%s rank=%d/%d" % (
        PROGRESS_PREFIX, global_step, signal_name, node, rank, world_size)


def slow_seconds(dcfg: Dict[str, Any], group_rank: int, local_rank: int) -> float:
    """A straggler on purpose: the seconds this rank sleeps in every step (counted in its compute_time_s), for every
    rank of node ``debug.slow_node_rank``, or only its local rank ``debug.slow_local_rank`` where that is set."""
    if dcfg["slow_node_rank"] != group_rank or dcfg["slow_local_rank"] not in (None, local_rank):
        return 0.0
    return dcfg["slow_step_s"]


def inject_failure(mode: str, rank: int, global_step: int) -> None:
    """debug.fail_rank/fail_step: crash (``raise``) or hang outside any collective (``hang``, for stall tests)."""
    if mode == "hang":
        print("[trainops] debug hang injected: rank %d at global_step %d (debug.fail_mode=hang)" % (rank, global_step),
              flush=True)
        while True:
            time.sleep(3600)
    raise RuntimeError("debug failure injected: rank %d at global_step %d (debug.fail_rank/debug.fail_step)"
                       % (rank, global_step))


def train(cfg: Dict[str, Any], device: torch.device) -> float:
    """Run the configured training on ``device`` in the initialised process group; return the final global loss."""
    info = dist_env()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local_rank = info["local_rank"]
    node = socket.gethostname()
    tcfg, dcfg = cfg["training"], cfg["debug"]
    backend = dist.get_backend()
    out_dir = os.path.abspath(tcfg["output_dir"])
    os.makedirs(out_dir, exist_ok=True)
    ckpt_path = os.path.join(out_dir, CHECKPOINT_NAME)
    checkpoint_signal = CheckpointSignal()
    checkpoint_signal.install()
    last_signalled = None  # local rank 0: the last checkpoint the signal caused, kept in checkpoint.json

    torch.manual_seed(tcfg["seed"])
    model = build_model(cfg["model"]).to(device)
    flops_per_sample = train_flops_per_sample(model)
    num_params = sum(p.numel() for p in model.parameters())
    dataset = build_dataset(cfg)

    # the checkpoint first: the run it resumes decides how the global batch is split (data_parallel_plan)
    state = load_checkpoint_collective(ckpt_path, rank, world_size) if tcfg["resume"] else None
    if tcfg["resume"] and state is None and rank == 0:
        LOG.warning("training.resume=true but no %s on any rank; starting from scratch", ckpt_path)
    if state is not None and state["config"]["model"] != cfg["model"]:
        raise RuntimeError("checkpoint %s was written for model config %r, not %r" % (ckpt_path, state["config"]["model"], cfg["model"]))
    plan = data_parallel_plan(world_size, len(dataset), tcfg["batch_size"], state)
    accumulation = plan["accumulation_steps"]
    # rank r takes shards r*accumulation ... of the global batch: resumed on fewer ranks, every step sees the samples
    # of the run it resumes
    samplers = [DistributedSampler(dataset, num_replicas=plan["replicas"], rank=rank * accumulation + shard, shuffle=True,
                                   seed=cfg["data"]["seed"], drop_last=True) for shard in range(accumulation)]
    loaders = [DataLoader(dataset, batch_size=tcfg["batch_size"], sampler=sampler, drop_last=True, num_workers=0,
                          pin_memory=device.type == "cuda") for sampler in samplers]
    steps_per_epoch = plan["steps_per_epoch"]
    if steps_per_epoch == 0:
        raise RuntimeError("data.num_samples=%d is too small for %d ranks x training.batch_size=%d"
                           % (cfg["data"]["num_samples"], plan["replicas"], tcfg["batch_size"]))
    total_steps = tcfg["epochs"] * steps_per_epoch
    if tcfg["max_steps"] is not None:
        total_steps = min(total_steps, tcfg["max_steps"])

    # on a GPU the fused AdamW kernel updates every parameter in one launch instead of a chain of per-tensor ops
    optimizer = torch.optim.AdamW(model.parameters(), lr=tcfg["lr"], weight_decay=tcfg["weight_decay"],
                                  fused=device.type == "cuda")
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda_factory(tcfg["warmup_steps"], total_steps, tcfg["min_lr_ratio"]))

    global_step, final_loss, resumed_from = 0, float("nan"), None
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        global_step = resumed_from = int(state["global_step"])
        final_loss = float(state.get("loss", float("nan")))
        del state
    if plan["note"] and rank == 0:
        emit("%s %s" % (PROGRESS_PREFIX, plan["note"]))
        if not plan["global_batch_kept"]:
            LOG.warning("%s", plan["note"])

    use_bf16 = bool(tcfg["bf16"]) and device.type == "cuda" and torch.cuda.is_bf16_supported()
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    # gradients as views into DDP's all-reduce buckets: no copy of every gradient into a bucket and back each step
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True)
    compute = ComputeTimer(device)
    compute.watch(ddp)
    ddp_model = ddp
    if tcfg["compile"]:
        # the DDP wrapper is compiled (its graph breaks at bucket boundaries keep the all-reduces overlapped); the
        # checkpoint keeps saving ``model``, whose state_dict names are unchanged
        ddp_model = torch.compile(ddp_model)

    tag = "rank_%02d" % rank
    write_json_atomic(os.path.join(out_dir, tag + "_env.json"), {
        "hostname": node,
        "rank": rank,
        "world_size": world_size,
        "local_rank": local_rank,
        "local_world_size": info["local_world_size"],
        "group_rank": info["group_rank"],
        "master_addr": info["master_addr"],
        "master_port": info["master_port"],
        "backend": backend,
        "device": str(device),
        "accelerator": accelerator_name(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine(),
        "bf16_autocast": use_bf16,
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "torch_hip_version": getattr(torch.version, "hip", None),
        "nccl_version": nccl_version() if device.type == "cuda" and backend == "nccl" else None,
        "python_version": platform.python_version(),
        "pid": os.getpid(),
        # the CPUs this rank may run on (a launcher or Slurm's task binding may have narrowed them)
        "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        # where the rank's programs and libraries come from (a launcher that dropped the login environment shows here)
        "python_executable": sys.executable,
        "process_env": {name: os.environ.get(name) for name in PROCESS_ENV_NAMES},
        "num_threads": torch.get_num_threads(),
        "model_params": num_params,
        "train_flops_per_sample": flops_per_sample,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps,
        "resumed_from_global_step": resumed_from,
        "previous_world_size": plan["previous_world_size"],
        "accumulation_steps": accumulation,
        "global_batch": plan["global_batch"],
        "global_batch_kept": plan["global_batch_kept"],
        "secret_env_present": secret_env_presence(),
        "config": cfg,
        "env": collected_env(),
        "time": time.time(),
    })

    metrics = open(os.path.join(out_dir, tag + "_metrics.jsonl"), "a" if global_step else "w", encoding="utf-8")
    fail_rank, fail_step = dcfg["fail_rank"], dcfg["fail_step"]
    sleep_s = dcfg["sleep_per_step_s"]
    slow_s = slow_seconds(dcfg, info["group_rank"], local_rank)
    max_norm = tcfg["grad_clip"] if tcfg["grad_clip"] > 0 else float("inf")
    first_step = global_step + 1
    profiler = StepProfiler(os.environ.get(PROFILE_TRACE_ENV), device)
    profiler.start()
    try:
        window_start, window_steps = time.perf_counter(), 0
        for epoch in range(global_step // steps_per_epoch, tcfg["epochs"]):
            if global_step >= total_steps:
                break
            for sampler in samplers:
                sampler.set_epoch(epoch)
            skip = global_step - epoch * steps_per_epoch
            ddp_model.train()
            batches = zip(*[itertools.islice(loader, skip, steps_per_epoch) for loader in loaders])
            for step, micro_batches in enumerate(batches, start=skip + 1):
                if global_step >= total_steps:
                    break
                if fail_rank == rank and fail_step == global_step + 1:
                    inject_failure(dcfg["fail_mode"], rank, global_step + 1)
                lr = optimizer.param_groups[0]["lr"]
                optimizer.zero_grad(set_to_none=True)
                compute.begin()
                if slow_s:
                    time.sleep(slow_s)
                losses = []
                for shard, (inputs, targets) in enumerate(micro_batches):
                    inputs = inputs.to(device, non_blocking=True)
                    targets = targets.to(device, non_blocking=True)
                    # gradients of the shards before the last stay local; the last one's backward all-reduces them
                    with ddp.no_sync() if shard < accumulation - 1 else contextlib.nullcontext():
                        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_bf16):
                            outputs = ddp_model(inputs)
                        loss = F.mse_loss(outputs.float(), targets)
                        (loss / accumulation if accumulation > 1 else loss).backward()
                    losses.append(loss.detach())
                compute.end()  # at the moment the last gradient bucket was ready: the wait for the others is left out
                compute.begin()
                grad_norm = torch.nn.utils.clip_grad_norm_(ddp_model.parameters(), max_norm)
                optimizer.step()
                scheduler.step()
                compute.end()
                loss = losses[0] if accumulation == 1 else torch.stack(losses).mean()
                global_step += 1
                window_steps += 1
                profiler.step()

                is_last = global_step == total_steps
                if global_step == first_step or global_step % tcfg["log_interval"] == 0 or is_last:
                    # The all-reduce (and .item()) synchronises the device, so the window timing is honest.
                    stats = torch.stack([loss.detach().float(), torch.tensor(time.perf_counter() - window_start, device=device)])
                    local_loss = float(stats[0].item())
                    dist.all_reduce(stats)
                    global_loss, mean_window = (stats / world_size).tolist()
                    if not math.isfinite(global_loss):
                        raise RuntimeError("non-finite loss %r at global_step %d" % (global_loss, global_step))
                    elapsed = time.perf_counter() - window_start
                    step_time = elapsed / window_steps
                    compute_time = compute.take() / window_steps
                    samples_per_s = tcfg["batch_size"] * accumulation / step_time
                    record_ = {
                        "rank": rank, "world_size": world_size, "local_rank": local_rank, "group_rank": info["group_rank"],
                        "node": node, "epoch": epoch, "step": step, "global_step": global_step, "total_steps": total_steps,
                        "loss": global_loss, "local_loss": local_loss, "grad_norm": float(grad_norm), "lr": lr,
                        "step_time_s": step_time, "compute_time_s": compute_time, "samples_per_s": samples_per_s,
                        "global_samples_per_s": plan["global_batch"] * window_steps / max(mean_window, 1e-12),
                        "tflops": flops_per_sample * samples_per_s / 1e12,
                        "device": device.type, "time": time.time(),
                        # resumed on another world size (data_parallel_plan): what changed
                        "previous_world_size": plan["previous_world_size"], "accumulation_steps": accumulation,
                        "global_batch": plan["global_batch"], "global_batch_kept": plan["global_batch_kept"],
                    }
                    metrics.write(json.dumps(record_) + "\n")
                    metrics.flush()
                    final_loss = global_loss
                    if local_rank == 0:
                        emit(progress_line(node, rank, world_size, epoch, global_step, total_steps, global_loss, samples_per_s))
                    window_start, window_steps = time.perf_counter(), 0

                end_of_epoch = step == steps_per_epoch
                periodic = tcfg["checkpoint_interval"] and global_step % tcfg["checkpoint_interval"] == 0
                # every rank takes part: the ranks agree on the checkpoint signal at this step boundary
                signalled = checkpoint_signal.agreed(device)
                reason = ("end" if is_last else "epoch_end" if end_of_epoch else "interval" if periodic
                          else "signal" if signalled else None)
                # every node's local rank 0 writes the same state (DDP keeps the replicas equal) into its node's
                # output directory: any node left after a node is lost has the checkpoint to resume from
                if local_rank == 0 and reason:
                    save_checkpoint(ckpt_path, {
                        "format": CHECKPOINT_FORMAT, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(), "epoch": epoch, "global_step": global_step,
                        "loss": final_loss, "world_size": world_size, "config": cfg,
                        "data_world_size": plan["replicas"], "steps_per_epoch": steps_per_epoch,
                        "total_steps": total_steps, "global_batch": plan["global_batch"],
                    })
                    written = {"global_step": global_step, "epoch": epoch, "reason": "signal" if signalled else reason,
                               "signal": checkpoint_signal.name if signalled else None, "path": ckpt_path,
                               "world_size": world_size, "time": time.time()}
                    if signalled:
                        last_signalled = dict(written)
                    write_json_atomic(os.path.join(out_dir, CHECKPOINT_RECORD_NAME),
                                      dict(written, last_signal_checkpoint=last_signalled))
                if signalled:
                    emit(checkpoint_line(node, rank, world_size, global_step, checkpoint_signal.name))
                if sleep_s:
                    time.sleep(sleep_s)
                    window_start += sleep_s  # keep the sleep out of step_time_s / samples_per_s
    finally:
        metrics.close()
        profiler.stop()
    return final_loss


@record
def main(argv: Optional[List[str]] = None) -> int:
    """Parse the command line, join the process group, train, print the ``done`` line; return 0.

    Any failure propagates as an exception (non-zero exit); ``record`` hands it to torchrun's error file.
    """
    parser = build_arg_parser()
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config, [text for group in args.override for text in group])
    except ConfigError as exc:
        parser.error(str(exc))
    if args.print_config:
        sys.stdout.write(yaml.safe_dump(cfg, sort_keys=False))
        return 0

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    info = dist_env()
    device = select_device(cfg["distributed"]["device"], info["local_rank"])
    backend = select_backend(cfg["distributed"]["backend"], device)
    init_distributed(backend, device, cfg["distributed"]["timeout_s"], info)
    ok = False
    try:
        final_loss = train(cfg, device)
        # every rank leaves the training collectives together (rank 0 may still be writing its
        # checkpoint): tearing the group down while a peer is mid-operation can abort at exit
        dist.barrier()
        emit(done_line(socket.gethostname(), dist.get_rank(), dist.get_world_size(), final_loss))
        ok = True
    finally:
        # On failure an NCCL peer may still be inside a collective with us; tearing down NCCL then can block,
        # so only gloo (and successful runs) destroy the group. The process exits right after either way.
        if dist.is_initialized() and (ok or backend != "nccl"):
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    CODE = main()
    # After a successful run everything is written, closed and the process group destroyed; torch's C++
    # teardown at interpreter exit can still abort a rank now and then ("terminate called without an
    # active exception", SIGABRT) and turn a finished job into a failed one: leave without running it.
    # Failures raise out of main() above and exit the normal way, with torchrun's error file.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(CODE)
