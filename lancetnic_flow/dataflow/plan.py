"""The memory plan: one budget, split between the OS, the trainer and the workers.

One budget is split explicitly: headroom for the OS and other programs, the
trainer (model, optimiser state, prefetched shards, shuffle buffer) and the
Dask workers. The workers' share sets ``LocalCluster(memory_limit=...)``;
the partition size follows from one worker's limit and the measured peak
memory of the transform per input byte.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace

import psutil

from ..errors import UserError
from ..sizes import format_size
from ..plurals import counted, verb

GiB = 2**30
MiB = 2**20
DEFAULT_BUDGET = 16 * GiB
# One task's peak RSS ≈ TASK_BASE + PEAK_PER_BYTE × partition bytes: a linear
# fit to benchmarks/partition_peak.py at 4/8/16 MiB. The worst case is the
# vocabulary path with bigrams (--features tfidf --ngram 1,2: 73 MiB + 28.6 per
# byte); the hashed default peaks at 39 MiB + 16.2 per byte. Rounded up.
PEAK_PER_BYTE = 29
TASK_BASE = 128 * MiB
# Larger partitions do not featurise faster (tasks work in pieces of 8,192
# rows) but raise each task's peak; at 4 MiB a task peaks near 190 MiB.
MAX_PARTITION = 4 * MiB
WORKER_BASE = 256 * MiB         # an idle worker: Python, Dask, pyarrow, numpy, compiled kernels (243 MiB RSS measured)
TRAINER_BASE = 450 * MiB        # the trainer process: Python, torch, Dask client
MIN_WORKER = 384 * MiB
# Arrow's default mimalloc pool keeps freed pages: the system allocator lets
# a worker's memory fall back, and every task hands its freed heap back as it
# ends (malloc_trim). Within a task, blocks up to 32 MiB come from the heap and
# are reused: glibc's default of a fresh mmap (page faults, zeroed pages) for
# every large array, which the nanny's MALLOC_TRIM_THRESHOLD_=65536 implies,
# made featurising ~30 % slower (docs/benchmarks.md). Set these for workers you
# start yourself. Arrow tables that crossed processes may be unaligned; Acero
# (group_by) then warns on every merge though the result is right. torch's
# OpenMP threads sleep rather than spin while they wait (see lancetnic_flow/__init__.py).
WORKER_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_TRIM_THRESHOLD_": "33554432",
              "MALLOC_MMAP_THRESHOLD_": "33554432", "ACERO_ALIGNMENT_HANDLING": "ignore",
              "OMP_WAIT_POLICY": "PASSIVE"}
THRESHOLDS = {"target": 0.60, "spill": 0.70, "pause": 0.80, "terminate": 0.95}


@dataclass(frozen=True)
class MemoryLines:
    """A worker's memory lines, as fractions of its limit (None: that line is off): Dask's
    ``distributed.worker.memory.*``. A LocalCluster of this project's has :data:`THRESHOLDS`;
    someone else's cluster may have any (read with ``dataflow.cluster.memory_lines``)."""

    target: float | None = THRESHOLDS["target"]
    spill: float | None = THRESHOLDS["spill"]
    pause: float | None = THRESHOLDS["pause"]
    terminate: float | None = THRESHOLDS["terminate"]

    def acts(self) -> float:
        """The first line where the worker acts on its memory (spills, pauses, is killed):
        what a worker's base, its tasks and what it holds stay under."""
        return next((x for x in (self.target, self.spill, self.pause, self.terminate) if x), 1.0)

    def stops(self) -> tuple[str, float]:
        """The line past which the worker runs no task (paused, or killed where it never pauses),
        by name: what it holds for a whole run must leave a task room under it."""
        return next(((n, x) for n, x in (("pause", self.pause), ("terminate", self.terminate)) if x), ("limit", 1.0))


DEFAULT_LINES = MemoryLines()


def soonest(lines: list[MemoryLines]) -> MemoryLines:
    """Each line at its lowest among ``lines`` (a line off only where it is off on every worker):
    what a plan of workers whose lines differ tells."""
    low = lambda xs: min((x for x in xs if x), default=None)  # noqa: E731
    return MemoryLines(*(low(getattr(x, n) for x in lines) for n in ("target", "spill", "pause", "terminate")))


def lines_text(lines: dict | MemoryLines | None) -> str:
    """``spill at 70% · pause at 80%``, as a plan's lines read (a dict: the plan's, sent to the dashboard)."""
    got = asdict(lines) if isinstance(lines, MemoryLines) else {**THRESHOLDS, **(lines or {})}
    said = [f"{n} at {got[n]:.0%}" for n in ("spill", "pause") if got.get(n)]
    return " · ".join(said + (["never pauses"] if not got.get("pause") else []))


@dataclass
class MemoryPlan:
    budget: int
    reserve: int
    trainer: int
    workers: int
    threads: int
    worker_limit: int
    partition: int
    in_flight: int
    external: bool = False   # workers belong to an existing cluster
    in_process: bool = False  # no workers: the trainer's process featurises too (dataflow/inprocess.py)
    held: int = 0   # of the trainer's share: what its process held past its base before the run (tune's search)
    # An existing cluster's limits added up: its workers may differ, and worker_limit is the smallest
    # (it sizes the partitions). 0: workers × worker_limit.
    workers_total: int = 0
    lines: MemoryLines = DEFAULT_LINES   # the workers' memory lines (the soonest of each, where they differ)

    def workers_bytes(self) -> int:
        """The workers' memory limits together."""
        return self.workers_total or self.workers * self.worker_limit

    def describe(self, cut: int = 0) -> str:
        """Two human lines, printed at start. ``cut``: the size the inputs were cut into, where an
        input too small for four of the plan's partitions a thread was cut finer (data/checks.py)."""
        g = lambda n: f"{n / GiB:.1f}"  # noqa: E731
        if self.in_process:
            head = (f"memory plan  budget {g(self.budget)} GiB · OS/other apps {g(self.reserve)} · trainer "
                    f"{g(self.trainer)}, featurising in this process ({self.threads} thread"
                    f"{'s' if self.threads > 1 else ''}, no workers)")
        elif self.external:
            each = (f"{counted(self.workers, 'worker')} × {format_size(self.worker_limit)}"
                    if self.workers_bytes() == self.workers * self.worker_limit else   # limits that differ
                    f"{counted(self.workers, 'worker')}, {format_size(self.workers_bytes())} in all, the smallest "
                    f"{format_size(self.worker_limit)}")
            head = f"memory plan  trainer {g(self.trainer)} GiB · existing cluster: {each}"
        else:
            head = (f"memory plan  budget {g(self.budget)} GiB · OS/other apps {g(self.reserve)} · trainer "
                    f"{g(self.trainer)} · {self.workers} worker{'s' if self.workers > 1 else ''} × "
                    f"{format_size(self.worker_limit)} ({self.threads} thread{'s' if self.threads > 1 else ''})")
        # The plan's own (the most it allows) is in its dict: the line keeps to a terminal's width.
        size = format_size(cut if 0 < cut < self.partition else self.partition)
        tail = (f"             partition {size} (peak ≈ {PEAK_PER_BYTE}× per task) · "
                f"{self.in_flight} in flight · {lines_text(self.lines)}")
        if self.held:
            head += f"\n             the trainer's share counts {format_size(self.held)} this process held before the run"
        return head + "\n" + tail

    def to_dict(self) -> dict:
        return asdict(self)


def default_budget() -> int:
    """The smaller of this machine's RAM and a 16 GiB laptop."""
    return min(psutil.virtual_memory().total, DEFAULT_BUDGET)


def _partition_for(worker_limit: int, threads: int, resident: int = 0, lines: MemoryLines = DEFAULT_LINES) -> int:
    usable = max(worker_limit * lines.acts() - WORKER_BASE - resident - TASK_BASE * threads, 8 * MiB)
    size = int(usable / (PEAK_PER_BYTE * threads))
    return max(1 * MiB, min(MAX_PARTITION, size // MiB * MiB))


def worker_minimum(worker_model_bytes: int = 0, lines: MemoryLines = DEFAULT_LINES) -> int:
    """The smallest memory limit a worker may have: its base and a task, and with
    ``worker_model_bytes`` (a model it holds for the whole run) all of them under the
    worker's pause line (``lines``): past that line it takes no task, and the model never leaves."""
    if not worker_model_bytes:
        return MIN_WORKER
    return max(MIN_WORKER, math.ceil((MIN_WORKER + worker_model_bytes) / lines.stops()[1]))


def plan_memory(budget: int | None = None, *, workers: int | None = None, threads: int | None = None,
                model_bytes: int = 0, shuffle_bytes: int = 0, blocksize: int | None = None,
                model_options: str = "", worker_model_bytes: int = 0, holder: str = "the trainer",
                held: int = 0, ranks: int = 0) -> MemoryPlan:
    """Split ``budget`` between OS headroom, the trainer and local workers.

    Refuses (``UserError``) when the trainer's needs or the workers' minimum
    do not fit, naming only what would change that, each with a value that
    fits: the budget, fewer workers when more than one would not fit, and —
    when ``model_options`` names the options that shrink this run's model
    (the caller knows its features and network) — the model's size that fits.
    ``worker_model_bytes``: what each worker holds for the whole run (a loaded
    model: ``predict``, ``evaluate``); with a task and the worker's base it
    must stay below Dask's pause line, which sets a worker's minimum. ``holder``: who
    holds the model in this process, as the refusal names it. ``held``: what this
    process already holds past its base that the run cannot free (``tune``'s
    search, before its final run): part of the trainer's share. ``ranks``: ``--ddp``'s ranks,
    each on a worker of its own, so at least that many workers when ``workers`` is not
    given (a refusal then names the budget that holds them, or fewer ranks).
    """
    budget = budget or default_budget()
    reserve = budget // 4
    trainer = max(budget // 8, TRAINER_BASE + held + model_bytes + shuffle_bytes)
    worker_share = budget - reserve - trainer
    cpus = os.cpu_count() or 1
    threads = threads or 1
    worker_min = worker_minimum(worker_model_bytes)
    by_ranks = workers is None and ranks > max(1, min(cpus // threads, worker_share // (3 * worker_min)))
    if workers is None:
        workers = max(ranks, 1, min(cpus // threads, worker_share // (3 * worker_min)))
    if worker_share < workers * worker_min:
        # The smallest budget B with B - B//4 - max(B//8, fixed) >= workers' minimum
        # (headroom and trainer grow with B), rounded up to a tenth of a GiB.
        fixed, floor = TRAINER_BASE + held + model_bytes + shuffle_bytes, workers * worker_min
        need = math.ceil(max((floor + fixed) * 4 / 3, floor * 8 / 5) * 1.02 / GiB * 10) / 10
        ways = [f"{{cluster.memory_budget}} {need:.1f}GiB or more"]
        fit_workers = (budget - reserve - trainer) // worker_min
        if 1 <= fit_workers < workers:   # fewer ranks when the ranks set the workers: fewer workers would not hold them
            ways.append(f"{{training.ddp}} {fit_workers}" if by_ranks else f"{{cluster.workers}} {fit_workers}")
        # The model that would leave the workers their minimum (the trainer's share grows with it past budget/8).
        fit_model = budget - reserve - workers * MIN_WORKER - TRAINER_BASE - held - shuffle_bytes
        if model_options and model_bytes > 0 and not worker_model_bytes and fit_model > 0 \
                and budget - reserve - budget // 8 >= floor:
            ways.append(f"a model of at most {format_size(fit_model)} ({model_options})")
        held = f", each holding the model's {format_size(worker_model_bytes)}" if worker_model_bytes else ""
        # A plan of the reading alone (predict's first, model_bytes 0) said "(the model 0 B)" of a model it left out.
        model = (f" ({'model and optimiser' if holder == 'the trainer' else 'the model'} {format_size(model_bytes)})"
                 if model_bytes else "")
        raise UserError(
            f"memory budget {format_size(budget)} is too small: {holder} needs {format_size(trainer)}{model} "
            f"and {counted(workers, 'worker')}{' (one per {training.ddp} rank)' if by_ranks else ''} "
            f"{verb(workers, 'needs', 'need')} "
            f"{format_size(workers * worker_min)}{held} after {format_size(reserve)} of OS headroom",
            "use " + (", ".join(ways[:-1]) + ", or " + ways[-1] if len(ways) > 1 else ways[0]))
    worker_limit = worker_share // workers
    partition = blocksize or _partition_for(worker_limit, threads, worker_model_bytes)
    return MemoryPlan(budget, reserve, trainer, workers, threads, worker_limit, partition,
                      in_flight=max(2, 2 * workers * threads), held=held)


def plan_for_workers(workers: list[dict], *, trainer: int, blocksize: int | None = None,
                     worker_model_bytes: int = 0, lines: list[MemoryLines] | None = None) -> MemoryPlan:
    """A plan for someone else's cluster, from its workers' ``scheduler_info`` entries:
    their memory limits and threads decide the partition size and the window.
    ``worker_model_bytes``: what each worker holds for the whole run (``predict``'s and
    ``evaluate``'s loaded model): left out of the partitions' room. ``lines``: each worker's
    memory lines, in ``workers``' order (default: Dask's defaults, this project's own)."""
    limits = [w.get("memory_limit") or psutil.virtual_memory().total for w in workers]
    lines = list(lines) if lines and len(lines) == len(workers) else [DEFAULT_LINES] * len(workers)
    limit = min(limits)
    needs = [worker_minimum(worker_model_bytes, line) for line in lines]
    small = [i for i, x in enumerate(limits) if x < needs[i]]
    if worker_model_bytes and small:
        _refuse_small_workers(small, limits, needs, lines, worker_model_bytes)
    threads = max(w.get("nthreads", 1) for w in workers)
    total_threads = sum(w.get("nthreads", 1) for w in workers)
    # The worker with the least room under the line where it acts on its memory sizes the partitions.
    partition = blocksize or min(_partition_for(x, threads, worker_model_bytes, line) for x, line in zip(limits, lines))
    return MemoryPlan(budget=0, reserve=0, trainer=trainer, workers=len(workers), threads=threads,
                      worker_limit=limit, partition=partition, in_flight=max(2, 2 * total_threads), external=True,
                      workers_total=sum(limits), lines=soonest(lines))


def _refuse_small_workers(small: list[int], limits: list[int], needs: list[int], lines: list[MemoryLines],
                          worker_model_bytes: int) -> None:
    # Under the pause line the loaded run leaves no room for a task: the worker would wait
    # forever, or be killed past its limit while loading (predict, evaluate).
    need = max(needs[i] for i in small)
    fit = math.ceil(need / GiB * 10) / 10
    name, line = lines[small[0]].stops()
    where = {"pause": "Dask's pause line", "terminate": "the line where its nanny kills it (it never pauses)",
             "limit": "its limit"}[name]
    shown = f" ({line:.0%} of the limit)" if name != "limit" else ""
    raise UserError(
        f"the cluster's workers are too small for this run: {counted(len(small), 'worker')} of {len(limits)} "
        f"{'has' if len(small) == 1 else 'have'} a memory limit of {format_size(min(limits[i] for i in small))}"
        f"{' or less' if len(small) > 1 else ''}, and each worker holds the run's loaded model "
        f"({format_size(worker_model_bytes)}) beside a task under {where}{shown}: a worker needs "
        f"{format_size(need)} or more",
        f"start the workers with `dask worker ADDRESS --memory-limit {fit:.1f}GiB` or more, or run without "
        "{cluster.scheduler} (a LocalCluster on this machine, planned from {cluster.memory_budget})")


def plan_in_process(plan: MemoryPlan, threads: int) -> MemoryPlan:
    """``plan`` with no workers: their share goes to the trainer's process,
    which runs the featurising tasks on ``threads`` threads."""
    return replace(plan, trainer=plan.trainer + plan.workers * plan.worker_limit, workers=0, threads=threads,
                   worker_limit=0, in_flight=max(2, 2 * threads), in_process=True)
