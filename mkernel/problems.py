"""What to compute: the op and its shape, independent of the machine.

A :class:`Workload` is what a scenario's ``[workload]`` table, the CLI flags and the Python API all
turn into. Per-kernel meaning of the shape fields is stated in each builder's docstring; for
``gemm_ar`` and ``gemm_rs``, ``k`` is the reduction dimension *per rank* (K_local in the paper); for
``ring_attention``, ``m`` is the sequence per GPU, ``n`` batch x heads and ``k`` the head dimension.
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir import Role

KERNELS = ("ag_gemm", "gemm_rs", "gemm_ar", "ring_attention", "moe_dispatch_gemm")
INTERNODE = ("auto", "direct", "twoshot", "ring")  # the GEMM ops' inter-node algorithm (mkernel.builders._rail)
# shifted ones: node-symmetric; multinomial: the paper's bench's draw (mkernel.routing)
ROUTINGS = ("uniform", "zipf", "shifted", "zipf_shifted", "multinomial")
BASELINES = ("hierarchical", "ring")
# What a run executes (mkernel.builders._auto): the fused schedule, the op's unfused baseline schedule
# (GEMM then NCCL, ...), or auto: the fused one where it beats the baseline, simulated (or estimated
# without a simulator)
SCHEDULES = ("auto", "fused", "baseline")
SPLITS = ("auto", "static")  # GEMM+RS's intra SMs: auto from the cost model per shape, or the old static 48
# How a GEMM op's node owner gets its node's partials of a tile (the ops in NODE_REDUCE_KERNELS): "pull",
# peer loads by its intra role; "push", each peer's intra role reduce-adds its partial into the owner's
# (mkernel.builders._gemm_rs_push, ._gemm_ar_push; GEMM+AR then broadcasts the owner's final tile).
# pull stays the default until real NVLink measures push faster
NODE_REDUCES = ("pull", "push")
NODE_REDUCE_KERNELS = ("gemm_rs", "gemm_ar")
# How a baseline's collectives are timed: "nccl", as the NCCL call they stand for (mkernel.nccl); "ir",
# as the rings of tasks that declare them (mkernel.builders._collectives), simulated like any schedule
COLLECTIVE_MODELS = ("nccl", "ir")


MAX_TASKS = 3_000_000  # a schedule this large would not fit in memory; builders refuse to declare it

# The shape a kernel gets when the CLI switches to it and gives none: the smallest of the reference
# grid (mkernel-design.md section 8) at world 16.
DEFAULT_SHAPES = {
    "ag_gemm": dict(m=4096, n=256, k=4096),
    "gemm_rs": dict(m=2048, n=2048, k=128),
    "gemm_ar": dict(m=2048, n=2048, k=128),
    "ring_attention": dict(m=768, n=64, k=128, tile_m=256),
    "moe_dispatch_gemm": dict(m=8192, n=2048, k=7168),
}


@dataclass(frozen=True, slots=True)
class Workload:
    """One op on one shape, with the schedule knobs that change its tiling and SM split."""

    kernel: str = "gemm_ar"
    m: int = 0
    n: int = 0
    k: int = 0
    dtype: str = "bf16"
    tile_m: int = 128  # Triton persistent GEMM's best tile on the H200 (h200-facts.md)
    tile_n: int = 256
    chunk_tiles: int = 4  # tiles per network chunk; 4 x 128x256 bf16 = 256 KiB (design §6)
    sms: tuple[tuple[Role, int], ...] = ()  # per-role SM overrides; unset roles get builder defaults
    baseline_channels: int = 16  # SMs an NCCL-style collective uses (its channel count)
    baseline_chunk_kib: int = 128  # bytes one ring step moves per chunk in the baseline (NCCL slice)
    causal: int = 0  # ring_attention: 1 for causal attention (zigzag split of the sequence)
    kv_tile: int = 128  # ring_attention: rows of K and V per NVLink ring step (a peer copy each; design §6)
    internode: str = "auto"  # the GEMM ops over the rails: INTERNODE, per op in builders/_rail.py
    experts: int = 256  # moe_dispatch_gemm: experts in all, experts / world per GPU
    topk: int = 8  # moe_dispatch_gemm: experts per token
    routing: str = "uniform"  # moe_dispatch_gemm: ROUTINGS (zipf: skewed popularity; shifted: node 0's for all;
    # multinomial: the paper's bench, seeded by routing_seed)
    routing_seed: int = 0
    # moe_dispatch_gemm: routing given rather than drawn (the torch op's case): per source rank, per
    # token, its topk expert ids; overrides routing and routing_seed when not empty
    routes: tuple[tuple[tuple[int, ...], ...], ...] = ()
    baseline: str = "hierarchical"  # the GEMM ops' NCCL-style collective: "hierarchical" or one flat "ring"
    collectives: str = "nccl"  # how the baselines' collectives are timed: COLLECTIVE_MODELS
    # SCHEDULES: what a run executes (builders/_auto.py; the result's "schedule"). fused by default: the
    # simulator predicts the fused kernel; auto is what the op would pick, for studies and `--schedule auto`
    schedule: str = "fused"
    split: str = "auto"  # SPLITS: GEMM+RS's intra SMs when sms sets none (builders/_auto.py)
    node_reduce: str = "pull"  # NODE_REDUCES: GEMM+RS's and GEMM+AR's node reduction, pulled by the owner or pushed into it

    def sm_override(self, role: Role) -> int | None:
        return dict(self.sms).get(role)

    def require_positive(self, *names: str) -> None:
        """Refuse, naming the op and the field, any of ``names`` below 1."""
        from .errors import ProblemError

        for name in names:
            if getattr(self, name) < 1:
                raise ProblemError(f"{self.kernel} needs {name} >= 1, got {getattr(self, name)}")
