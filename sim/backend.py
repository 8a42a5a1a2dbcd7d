"""SimBackend: set up a :class:`~mkernel.sim.engine.Model`, run it, and report :class:`RunStats`."""
from __future__ import annotations

import time

import numpy as np

from mkernel.backend import Capabilities, RunStats
from mkernel.cluster import Cluster
from mkernel.errors import BackendUnavailable, InputError
from mkernel.ir import BufferKind, Schedule, paused_gc
from mkernel.members import RegionTable
from mkernel.reference import DATA_RTOL

from . import native
from .collapse import collapse as fold
from .collapse import is_node_symmetric
from .data import DataStore
from .engine import Model
from .faults import Faults
from .faults import parse as parse_faults
from .localfold import NotFoldable, cluster_refusal, fold_locals, refusal


class SimBackend:
    """Runs any valid schedule on the SimPy model. Deterministic: same inputs, same trace."""

    name = "sim"
    caps = Capabilities(where="in the simulator", predicts=True, grouped=True, models_library=True,
                        always_data=False, samples=True, collapses=True, proxy_metrics=True,
                        own_trajectory=False, faults_in_proxy=False)
    rtol = DATA_RTOL

    def cluster_for(self, cluster: Cluster) -> Cluster:
        """The cluster as given: the simulator models every GPU the scenario names."""
        return cluster

    def supports(self, schedule: Schedule, cluster: Cluster) -> str | None:
        if schedule.world != cluster.world:
            return f"schedule is for {schedule.world} ranks, cluster has {cluster.world}"
        return None

    def options(self, *, transport: str | None = None, heap: str | None = None,
                faults: str | None = None) -> dict:
        """``faults`` parsed (:func:`mkernel.sim.faults.parse`). ``transport`` is the scenario's
        (the command line sets ``cluster.transport``, the NIC protocol this model times), and a
        simulated run has no symmetric heap to place, so ``heap`` is refused."""
        if heap is not None:
            raise InputError(f"--heap {heap}: --heap applies to --backend hw (where the fused run's symmetric "
                             "buffer lives); the simulator places no symmetric heap")
        return {"faults": parse_faults(faults)} if faults else {}

    def folds_locals(self, cluster: Cluster) -> bool:
        """Whether a quiet collapsed run on ``cluster`` (no controller, trace or stress) may fold
        local ranks (:mod:`mkernel.sim.localfold`), so a build of local rank 0 alone serves it."""
        return cluster.gpus_per_node > 1 and cluster_refusal(cluster) is None

    @paused_gc()  # a run makes millions of short-lived objects; the schedule's are scanned at every full pass
    def run(self, schedule: Schedule, cluster: Cluster, *, inputs: dict[str, list[np.ndarray]] | None = None,
            seed: int = 0, trace: bool = False, epoch: int = 1, stress: float = 0.0,
            collapse: bool = False, faults: Faults | None = None, controller=None, workload=None,
            progress=None, sample=None, hazards: bool | None = None, transport: str = "loopback",
            heap: str = "device", regions: RegionTable | None = None) -> RunStats:
        """Simulate ``schedule``. ``seed`` drives SRD jitter and ``stress``; ``stress`` > 0 randomly
        scales durations (see :mod:`mkernel.sim.engine`) to expose races; use 0 for timings.

        ``collapse`` simulates node 0 only when the schedule is node-symmetric (see
        :mod:`mkernel.sim.collapse`): exact times, no data, no hazard tracking. It is ignored for
        data runs and for schedules that are not symmetric. A schedule built for its first nodes
        alone (``Schedule.first_nodes``) always runs collapsed, and one built for their local rank 0
        alone (``Schedule.local_fold``) with its local ranks folded.
        ``faults`` injects seeded faults (:mod:`mkernel.sim.faults`); a faulty run is never collapsed.
        ``controller`` moves SMs between roles at task boundaries (:mod:`mkernel.controller`).
        ``workload`` is not needed: the schedule holds everything the simulator runs; nor are
        ``transport`` and ``heap`` (the hw fused run's Context): it models the network from ``cluster``.
        ``progress(variant, done, total)`` hears, now and then, how many tasks have ended.
        ``sample`` (a :class:`mkernel.sampling.Plan`): data mode on its kept rows and columns, the
        ``inputs`` given at those.
        ``hazards``: track hazards (:mod:`mkernel.sim.hazards`, on the groups); None: wherever the
        run is not collapsed; False for a timing run that reads no hazards (a sweep's), which then
        also merges wake-ups that a tracker would tell apart (the same times: the tracker only watches).
        ``regions``: ``schedule``'s region table as its ``validate()`` returned it, which the hazard
        grids then read instead of reading the schedule again (a run of another schedule, expanded or
        folded, reads its own).
        """
        wall = time.perf_counter()
        if schedule.first_nodes and (inputs is not None or (faults and faults.any)):
            raise BackendUnavailable(f"{schedule.kernel}/{schedule.variant} was built for its first nodes only; "
                                     "data and fault runs need the full schedule (build it with first_nodes=0)")
        if schedule.elided and inputs is not None:
            raise BackendUnavailable(f"{schedule.kernel}/{schedule.variant} is a timing build: its library launches "
                                     f"{list(schedule.elided)} have no tasks, and a data run executes them (build it "
                                     "with library_tasks=True)")
        if regions is not None and not _fits(regions, schedule):
            raise InputError(f"regions: the table handed to the run of {schedule.kernel}/{schedule.variant} is not "
                             "its schedule's (pass what this schedule's validate() returned, or None)")
        if schedule.local_fold:
            why = refusal(schedule, cluster, controller=controller, trace=trace, stress=stress)
            if why:
                raise BackendUnavailable(f"{schedule.kernel}/{schedule.variant} was built for local rank 0 alone, and "
                                         f"this run may not fold local ranks ({why}): build it with local_fold=False")
        span = schedule.first_nodes or cluster.fold_nodes
        folded = bool(schedule.first_nodes) or (collapse and span > 0 and inputs is None
                                                and not (faults and faults.any) and is_node_symmetric(schedule))
        run_schedule = fold(schedule, span) if folded else schedule
        ranks_folded: int | str = "not collapsed"
        if schedule.local_fold:
            ranks_folded = schedule.local_fold  # folded when built
        elif folded:
            ranks_folded = refusal(run_schedule, cluster, controller=controller, trace=trace, stress=stress) or 0
            if not ranks_folded:
                try:
                    run_schedule, ranks_folded = fold_locals(run_schedule), run_schedule.gpus_per_node
                except NotFoldable as e:
                    ranks_folded = f"not rotation-symmetric: {e}"
        local = ranks_folded if isinstance(ranks_folded, int) else 1
        data = DataStore(schedule, inputs, sample) if inputs is not None else None
        model = Model(run_schedule, cluster, data, epoch=epoch, seed=seed, trace=trace, stress=stress,
                      track_hazards=not folded and hazards is not False, faults=faults, controller=controller,
                      progress=progress, fold=local, regions=regions if run_schedule is schedule else None)
        model.run()
        ranks = model.ranks
        copies = schedule.world // len(ranks)  # each simulated rank stands for this many
        tiers = {k: [v[r] for r in ranks] * copies for k, v in
                 (("nvlink", [link.bytes for link in model.nv_out]), ("network", model.net_bytes), ("host", model.host_bytes))}
        outputs = None
        if data is not None:
            outputs = {b.name: data.output(b.name) for b in schedule.buffers if b.kind is BufferKind.OUTPUT}
        stats = RunStats(
            time_s=max(model.finish[r] for r in ranks) * 1e-6,
            per_rank_s=tuple(model.finish[model.home[r % run_schedule.world]] * 1e-6 for r in range(schedule.world)),
            bytes_total={k: float(sum(v)) for k, v in tiers.items()},
            bytes_per_gpu={k: float(max(v)) for k, v in tiers.items()},
            wall_s=time.perf_counter() - wall,
            events=model.env.events,
            outputs=outputs,
            spans=_spans(model),
            counters=_counters(model),
            hazards=tuple(model.tracker.hazards),
            metrics={**_metrics(model), "collapsed": folded, "ranks_folded": ranks_folded,
                     "sim_core": native.state, "faults": _injected(model)},
        )
        model.close()
        return stats


def _injected(model: Model) -> dict | None:
    """What the fault injector did (None when no fault was asked for)."""
    inj = model.inject
    if not inj.f.any:
        return None
    return {"dropped": inj.dropped, "duplicated": inj.duplicated, "reordered": inj.reordered,
            "lost_to_nic": inj.lost_to_nic}


def _spans(model: Model) -> list[tuple] | None:
    if model.spans is None:
        return None
    proxy = [(rank, "proxy", 0, f"post {n} commands", start, end) for rank, start, end, n in model.proxy_spans]
    return model.spans + proxy


def _counters(model: Model) -> list[tuple] | None:
    """Each link's total rate over time, in GB/s, for the links that carried anything."""
    if model.spans is None:
        return None
    return [(rank, link.name, [(t, rate / 1e3) for t, rate in link.samples])
            for rank, link in model.all_links() if link.samples]


def _metrics(model: Model) -> dict:
    """Proxy counters (summed over ranks) and the time breakdown of the slowest rank (us).

    compute + exposed_communication = total; proxy_queueing (time its ring held a command the proxy
    had not taken) and fence_wait (time its proxy sat in fences) overlap with both.
    """
    slow = max(model.ranks, key=lambda r: model.finish[r])
    total = model.finish[slow]
    links = model.all_links()
    util = max((l.busy_bytes / (l.capacity * total) for _, l in links), default=0.0) if total > 0 else 0.0
    return {**{k: v * model.fold for k, v in model.net.metrics.items()},  # a folded rank stands for fold ranks
            "breakdown_us": {"total": total, "compute": model.compute_busy[slow],
                             "exposed_communication": total - model.compute_busy[slow],
                             "proxy_queueing": model.net.rings[slow].nonempty_us,
                             "fence_wait": model.net.fence_wait[slow]},
            "max_link_utilization": util}


def _fits(regions: RegionTable, schedule: Schedule) -> bool:
    """Whether ``regions`` can be ``schedule``'s table: one record per region, the last one's entry
    the last task that has regions. A cheap screen (a table of another schedule would misplace every hazard cell)."""
    recs, fields, _ = regions
    per = [len(t.reads) + len(t.writes) for t in schedule.tasks]
    last = next((i for i in range(len(per) - 1, -1, -1) if per[i]), -1)  # (sought from the end: only the last
    # few tasks, a kernel's drains, have no regions; a max over every index was a generator step a task)
    return len(recs) == sum(per) and (last < 0 or int(fields["entry"][-1]) == last)
