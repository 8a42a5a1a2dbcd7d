"""Megatron-style tensor-parallel layers on the fused ops, with sequence parallelism.

Between blocks, activations are split by tokens: each rank holds its ``T / world`` rows (the
leading dimension; sequence-first tensors such as [S / world, B, H] work, since only the leading
dimension is split). Inside a block they are split by features. So

- :class:`ColumnParallelLinear`: ``y [T, out / world] = all_gather(x [T / world, in]) @ W_r + b_r``,
  one ``ag_gemm`` (its backward: ``gemm_rs`` for x's gradient);
- :class:`RowParallelLinear`: ``y = x [T, in / world] @ W_r``, summed over ranks, plus b:
  ``reduce="scatter"`` keeps this rank's rows, [T / world, out] (``gemm_rs``, Megatron's sequence
  parallelism); ``reduce="all"`` keeps every row on every rank, [T, out] (``gemm_ar``);
- :class:`ParallelMLP`: column-parallel, activation, row-parallel (scatter): tokens in, tokens out.

Weights are stored [in, out] per rank, the ops' B layout, so no call transposes them;
:meth:`from_linear` shards a ``torch.nn.Linear`` (weight [out, in]). Every op call goes through the
public wrappers, so the path rule, ``mode``, torch.compile and autograd apply as there (compile
with ``dynamic=False``: the path rule reads sizes as constants, and a recompile that makes them
dynamic fails in ``api._traced_path``); nothing
synchronises the host, so a warmed-up step (forward and backward: the first calls build the
executors, collectively) can be captured in a CUDA graph.

The loss convention is Megatron's: behind a scattered output each rank's loss covers its own
tokens and the model's loss is their sum; behind ``reduce="all"`` every rank computes the same
loss. Parameters every rank holds whole (a row-parallel bias) get their gradient summed over the
ranks where each rank's copy saw only its tokens (:func:`collectives.replicate`).
"""
from __future__ import annotations

import torch

from mkernel.errors import InputError

from . import api
from .collectives import replicate
from .groups import group_info

REDUCE = ("scatter", "all")


class _Parallel(torch.nn.Module):
    """A linear layer's shard: weight [in, out] of this rank, the group by name, the op knobs.
    ``seed``: initialised as ``nn.Linear(in, out)`` drawn from that seed (alike on every rank),
    sharded; None: left uninitialised (for :meth:`load_`)."""

    def __init__(self, in_features: int, out_features: int, bias: bool, group, split: str, knobs: dict,
                 device, dtype, seed: int | None):
        super().__init__()
        g = group_info(group)
        self.group, self.world, self.rank = g.name or None, g.world, g.rank  # by name: torch.compile traces strings
        self.in_features, self.out_features, self.split = in_features, out_features, split
        self.knobs = knobs
        whole = {"in": in_features, "out": out_features}
        if whole[split] % g.world:
            raise InputError(f"{type(self).__name__}: {split}_features = {whole[split]} does not split over "
                             f"{g.world} ranks")
        whole[split] //= g.world
        self.weight = torch.nn.Parameter(torch.empty(whole["in"], whole["out"], device=device, dtype=dtype))
        bias_features = whole["out"] if split == "out" else out_features
        self.bias = torch.nn.Parameter(torch.empty(bias_features, device=device, dtype=dtype)) if bias else None
        if seed is not None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                self.load_(torch.nn.Linear(in_features, out_features, bias=bias))

    def shard(self, linear: torch.nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
        """This rank's (weight [in, out], bias) of ``linear`` (weight [out, in]), as views."""
        if (linear.in_features, linear.out_features) != (self.in_features, self.out_features) or \
                (linear.bias is None) != (self.bias is None):
            raise InputError(f"{type(self).__name__}: a Linear({self.in_features}, {self.out_features}, "
                             f"bias={self.bias is not None}) is needed, got {linear}")
        n = self.weight.shape[0 if self.split == "in" else 1]
        mine = slice(self.rank * n, (self.rank + 1) * n)
        full = linear.weight.t()
        weight = full[mine] if self.split == "in" else full[:, mine]
        bias = None if linear.bias is None else linear.bias[mine] if self.split == "out" else linear.bias
        return weight, bias

    def load_(self, linear: torch.nn.Linear):
        """Copy this rank's shard of ``linear`` (the same full layer on every rank)."""
        weight, bias = self.shard(linear)
        with torch.no_grad():
            self.weight.copy_(weight)
            if self.bias is not None:
                self.bias.copy_(bias)
        return self

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, group=None, **knobs):
        """This rank's shard of ``linear`` (every rank passes the same full layer)."""
        return cls(linear.in_features, linear.out_features, linear.bias is not None, group, seed=None,
                   device=linear.weight.device, dtype=linear.weight.dtype, **knobs).load_(linear)

    def _flat(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.weight.shape[0]:
            raise InputError(f"{type(self).__name__}: the input's last dimension is {x.shape[-1]}; this rank's "
                             f"shard takes {self.weight.shape[0]} features")
        return x.reshape(-1, x.shape[-1])


class ColumnParallelLinear(_Parallel):
    """``y [T, out / world] = all_gather(x [T / world, in]) @ W_r + b_r`` (``mkernel.ag_gemm``):
    this rank's output features of every token."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, group=None, *, gpus_per_node=None,
                 sms=None, mode: str = "auto", transport: str = "auto", device=None, dtype=None, seed: int | None = 0):
        super().__init__(in_features, out_features, bias, group, "out",
                         {"gpus_per_node": gpus_per_node, "sms": sms, "mode": mode, "transport": transport}, device,
                         dtype, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = api.ag_gemm(self._flat(x), self.weight, self.group, **self.knobs)
        if self.bias is not None:
            y = y + self.bias
        return y.view(-1, *x.shape[1:-1], y.shape[-1])


class RowParallelLinear(_Parallel):
    """``y = sum over ranks of x [T, in / world] @ W_r, + b``: this rank's T / world rows
    (``reduce="scatter"``, ``mkernel.gemm_rs``) or every row (``reduce="all"``, ``mkernel.gemm_ar``).
    The bias is whole on every rank, added after the sum."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, group=None, *, reduce: str = "scatter",
                 gpus_per_node=None, sms=None, mode: str = "auto", transport: str = "auto", device=None, dtype=None,
                 seed: int | None = 0):
        if reduce not in REDUCE:
            raise InputError(f"RowParallelLinear: reduce={reduce!r} is not one of {', '.join(REDUCE)}")
        super().__init__(in_features, out_features, bias, group, "in",
                         {"gpus_per_node": gpus_per_node, "sms": sms, "mode": mode, "transport": transport}, device,
                         dtype, seed)
        self.reduce = reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = self._flat(x)
        if self.reduce == "scatter":
            if flat.shape[0] % self.world:
                raise InputError(f"RowParallelLinear: {flat.shape[0]} rows do not split over {self.world} ranks")
            y = api.gemm_rs(flat, self.weight, self.group, **self.knobs)
            bias = None if self.bias is None else replicate(self.bias, self.group)  # each rank's rows: summed
        else:
            y = api.gemm_ar(flat, self.weight, self.group, **self.knobs)
            bias = self.bias  # every rank's loss is the whole loss: its gradient is whole already
        if bias is not None:
            y = y + bias
        return y.view(-1, *x.shape[1:-1], y.shape[-1])


class ParallelMLP(torch.nn.Module):
    """``fc2(activation(fc1(x)))`` with fc1 column- and fc2 row-parallel: x is this rank's tokens
    [T / world, hidden], and so is the result (``reduce="scatter"``), or every token [T, hidden]
    on every rank (``reduce="all"``); the [T, ffn / world] in between never leaves the rank.
    ``knobs``: gpus_per_node, sms, mode, transport, device, dtype (both layers)."""

    def __init__(self, hidden: int, ffn: int, bias: bool = True, group=None, *, reduce: str = "scatter",
                 activation=None, seed: int | None = 0, **knobs):
        super().__init__()
        self.fc1 = ColumnParallelLinear(hidden, ffn, bias, group, seed=seed, **knobs)
        self.fc2 = RowParallelLinear(ffn, hidden, bias, group, reduce=reduce, seed=None if seed is None else seed + 1,
                                     **knobs)
        self.activation = activation or torch.nn.functional.gelu

    @classmethod
    def from_mlp(cls, fc1: torch.nn.Linear, fc2: torch.nn.Linear, group=None, *, reduce: str = "scatter",
                 activation=None, **knobs) -> ParallelMLP:
        """The TP shards of a torch MLP ``fc2(activation(fc1(x)))`` (every rank passes the same layers)."""
        mlp = cls(fc1.in_features, fc1.out_features, fc1.bias is not None, group, reduce=reduce, activation=activation,
                  seed=None, device=fc1.weight.device, dtype=fc1.weight.dtype, **knobs)
        mlp.fc1.load_(fc1)
        mlp.fc2.load_(fc2)
        return mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.activation(self.fc1(x)))
