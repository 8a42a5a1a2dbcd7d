"""Process groups as the ops see them: name, size, rank, and whether collectives go through the host.

A group is a torch ProcessGroup, its name, or None (the world group; with torch.distributed not
initialised, one process alone: world 1, so the ops work as plain torch without any set-up).
Resolved once per group object and kept, since an op call must not pay for it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist


@dataclass(frozen=True)
class GroupInfo:
    name: str  # "" for one process without torch.distributed
    world: int
    rank: int
    host: bool  # gloo: collectives move through host memory (the emulated clusters)
    pg: object  # the ProcessGroup, or None


_ALONE = GroupInfo("", 1, 0, False, None)
_RESOLVED: dict[object, GroupInfo] = {}


def group_info(group=None) -> GroupInfo:
    """The group's :class:`GroupInfo` (None: the world group; a GroupInfo: itself)."""
    if isinstance(group, GroupInfo):
        return group
    if group is None:
        if not dist.is_initialized():
            return _ALONE
        group = dist.group.WORLD
    hit = _RESOLVED.get(group)
    if hit is None:
        pg = group
        if isinstance(group, str):
            from torch.distributed.distributed_c10d import _resolve_process_group

            pg = _resolve_process_group(group)
        hit = _RESOLVED[group] = GroupInfo(pg.group_name, dist.get_world_size(pg), dist.get_rank(pg),
                                           dist.get_backend(pg) == "gloo", pg)
    return hit


def forget() -> None:
    """Drop every resolved group (after a process group is destroyed)."""
    _RESOLVED.clear()
