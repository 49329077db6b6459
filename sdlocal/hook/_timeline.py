"""The framework timeline: smdebug's PyTorch trace events, written as smdebug's
`..._pythontimeline.json` files under the profiler's LocalPath (trial.profiler.TraceWriter).

What is recorded while profiling is enabled (hook.profiler_config), named as smdebug names it:
- every step: phase and name `Step:ModeKeys.<MODE>`, args `step_num` (the mode's step), from the
  registered model's forward pre-hook to the end of the optimizer's step that follows (training),
  else to the end of the model's forward (evaluation, or no torch.optim optimizer);
- every step: `Forward` (name: the model's class), from that pre-hook to the model's forward end;
- every training step: `Backward(post-forward)` (name: the model's class), from the forward's end
  to the start of the optimizer's step: the loss, `zero_grad` and the backward pass (smdebug
  also started its backward event at the forward's end);
- data loading, in DataloaderProfilingConfig's range only (hook._dataloader);
- torch's profiler's operator events, in DetailedProfilingConfig's range only (hook._detailed).

Why the optimizer and not autograd: a Python hook inside the backward pass (a tensor hook per step
and autograd's final callback) costs 10-20 µs a step, a per-step cost the timeline cannot afford on
small models; torch's global optimizer step hooks are plain Python calls (well under 1 µs).

Cost model: the training thread only appends tuples to a deque (thread-safe for one producer and
one consumer without a lock); a daemon thread drains it every `drain_interval_s`, encodes and
writes the events and applies the rotation policy. A step's event is emitted when the next step
starts (its end is only known then) or when the timeline closes.

One timeline per process (`configure()` / `current()`): the zero-code hook and the hook a script
creates share it, so a hand-over between them neither loses nor duplicates a step. It counts the
steps itself (per mode, and globally for the metrics configs' step ranges), as the hook does: the
same numbers as the hook's steps when one hook runs the whole job, and no restart at 0 when a
script's hook writing elsewhere takes over from the zero-code hook.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sdlocal.hook._detailed import DetailedProfiler
from sdlocal.hook._job_paths import job_path
from sdlocal.hook.errors import HookConfigError
from sdlocal.hook.profiler_config import ProfileRange, ProfilerConfig
from sdlocal.trial.modes import ModeKeys
from sdlocal.trial.profiler.names import BACKWARD_PHASE, FORWARD_PHASE, PYTHON_TIMELINE_SUFFIX, step_phase
from sdlocal.trial.profiler.trace_writer import TraceWriter

logger = logging.getLogger(__name__)

RESOURCE_CONFIG = "/opt/ml/input/config/resourceconfig.json"
DRAIN_INTERVAL_S = 0.5
CLOSE_TIMEOUT_S = 30.0

# phase, name, start_us, end_us, args; or a step as the training thread leaves it (phase None):
# None, mode, mode step, model name, start, forward end, optimizer step start and end (epoch ns).
Event = tuple[Any, ...]
_STEP_PHASES = {int(m): step_phase(m.name) for m in ModeKeys}
_GLOBAL = int(ModeKeys.GLOBAL)


def _expand(raw: list[Event]) -> list[Event]:
    """The writer thread's side of a step: its Step, Forward and Backward(post-forward) events.
    Step: from the forward's start to the optimizer step's end (else the forward's end); Backward:
    from the forward's end to the optimizer step's start, when there was one."""
    out: list[Event] = []
    for ev in raw:
        if ev[0] is not None:
            out.append(ev)
            continue
        _, mode, mode_step, name, start, fwd_end, opt_start, opt_end = ev
        start, fwd_end, opt_start, opt_end = start // 1000, fwd_end // 1000, opt_start // 1000, opt_end // 1000
        args = {"step_num": mode_step}
        phase = _STEP_PHASES[mode]
        out.append((phase, phase, start, max(fwd_end, opt_end, start), args))
        if fwd_end:
            out.append((FORWARD_PHASE, name, start, fwd_end, args))
            if opt_start >= fwd_end:
                out.append((BACKWARD_PHASE, name, fwd_end, opt_start, args))
    return out


class RangeTracker:
    """Whether a ProfileRange covers a step, resolving its open ends on first use as smdebug does
    (no start step: the first step checked; no start time: the first check; a time range without
    a duration: the one step that is checked first at or after the start time)."""

    def __init__(self, rng: ProfileRange, clock_s: Callable[[], float] = time.time) -> None:
        self.range = rng
        self._clock_s = clock_s
        self._start_step = rng.start_step
        self._end_step: int | None = None
        if rng.start_step is not None:
            self._end_step = rng.start_step + (rng.num_steps or 1)
        self._start_time = rng.start_time_s
        self._end_time: float | None = None
        if rng.start_time_s is not None and rng.duration_s is not None:
            self._end_time = rng.start_time_s + rng.duration_s

    def active(self, step: int, now_s: float | None = None) -> bool:
        if not self.range.by_time:
            if self._end_step is None:
                self._start_step = step
                self._end_step = step + (self.range.num_steps or 1)
            return self._start_step is not None and self._start_step <= step < self._end_step
        now = self._clock_s() if now_s is None else now_s
        if self._start_time is None:
            self._start_time = now
            if self.range.duration_s is not None:
                self._end_time = now + self.range.duration_s
        if self._end_time is not None:
            return self._start_time <= now < self._end_time
        if self._end_step is None:
            if now < self._start_time:
                return False
            self._end_step = step + 1
        return step < self._end_step

    def finished(self, step: int) -> bool:
        """True once no later step can be in the range (by steps only; time is never known)."""
        return self._end_step is not None and not self.range.by_time and step >= self._end_step


def node_id() -> str:
    """smdebug's `<rank or pid>-<host>`: torch.distributed's rank when initialized, else the pid;
    the host from SageMaker's environment or resourceconfig.json, else the machine's name."""
    rank: int | None = None
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            rank = dist.get_rank()
    except ImportError:
        pass
    host = os.environ.get("SM_CURRENT_HOST") or _resource_host() or socket.gethostname()
    raw = f"{rank if rank is not None else os.getpid()}-{host}"
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in raw.replace("_", "-")) or "0-algo-1"


def _resource_host() -> str | None:
    try:
        data = json.loads(Path(RESOURCE_CONFIG).read_text())
    except (OSError, ValueError):
        return None
    host = data.get("current_host") if isinstance(data, dict) else None
    return host if isinstance(host, str) and host else None


class Timeline:
    def __init__(self, config: ProfilerConfig, *, clock_ns: Callable[[], int] = time.time_ns,
                 node: str | None = None, drain_interval_s: float = DRAIN_INTERVAL_S) -> None:
        if not config.enabled:
            raise ValueError("Timeline needs an enabled ProfilerConfig")
        self.config = config
        # Epoch ns; the per-step marks keep ns (time.time_ns is called directly, no Python frame),
        # the writer thread turns them into the trace's µs.
        self._clock_ns = clock_ns
        self.root = Path(job_path(config.local_path))  # SageMaker's /opt/ml/...: the job's folder
        self._node = node
        # Trace times are relative to this (each file says so): before any event can happen.
        self.start_time_us = self.clock_us()
        self._drain_interval_s = drain_interval_s
        self._events: deque[Event] = deque()
        self._writer: TraceWriter | None = None
        self._write_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._healthy = True
        self._open_failures = 0
        self.events_written = 0
        self.events_dropped = 0
        # Steps begun so far: global, and per mode (indexed by the ModeKeys value). The step in
        # progress: its mode (0: none), mode step, name, start; the forward's end and the
        # optimizer step's start and end (epoch ns, 0: not seen).
        self.step = -1
        self._counts = [-1] * (max(ModeKeys) + 1)
        self._mode = 0
        self._mode_step = -1
        self._start_us = 0
        self._name = ""
        self._fwd_end = 0
        self._opt_start = 0
        self._opt_end = 0
        self._handles: list[Any] = []
        self.dataloader = RangeTracker(config.dataloader.range) if config.dataloader is not None else None
        self._dataloader_names: dict[tuple[str, str], bool] = {}
        self.detailed: DetailedProfiler | None = None
        if config.detailed is not None:
            self.detailed = DetailedProfiler(self, RangeTracker(config.detailed))
        for what, cfg in (("PythonProfilingConfig", config.python), ("HorovodProfilingConfig", config.horovod),
                          ("SMDataParallelProfilingConfig", config.smdataparallel)):
            if cfg is not None:
                logger.info("sdlocal profiler: %s is not supported by this hook; ignored", what)

    # ------------------------------------------------------------------ training thread
    def clock_us(self) -> int:
        return self._clock_ns() // 1000

    @property
    def mode_steps(self) -> dict[ModeKeys, int]:
        return {m: self._counts[m] for m in ModeKeys}

    def step_start(self, mode: ModeKeys, name: str) -> None:
        """The registered model's forward pre-hook: closes the previous step, opens this one.
        Runs every step: only plain values are stored (the writer thread makes the events)."""
        now = self._clock_ns()
        if self._mode:
            self._emit_step()
        self.step = step = self.step + 1
        mode_step = step if mode == _GLOBAL else self._counts[mode] + 1
        self._counts[mode] = self._mode_step = mode_step
        self._mode = mode
        self._name = name
        self._start_us = now
        self._fwd_end = self._opt_start = self._opt_end = 0
        if self._thread is None or not self._handles:
            self._get_ready()
        if self.detailed is not None and not self.detailed.done:
            self.detailed.on_step(step, now // 1000)

    def _get_ready(self) -> None:
        """At the first step (and the first after a close): the writer thread, and torch's global
        optimizer step hooks (a model is being stepped: watch the optimizers from now on). The
        node id is taken now, while training runs: a distributed script has its rank by its
        first step, and may have destroyed its process group when the last files are written."""
        if self._node is None:
            self._node = node_id()
        if self._thread is None:
            self._start_thread()
        if not self._handles:
            from torch.optim import optimizer

            self._handles = [optimizer.register_optimizer_step_pre_hook(self._optimizer_pre),
                             optimizer.register_optimizer_step_post_hook(self._optimizer_post)]

    def forward_end(self, module: Any, inputs: Any, outputs: Any) -> None:
        """The registered model's forward hook."""
        self._fwd_end = self._clock_ns()

    def _optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._mode and not self._opt_start:
            self._opt_start = self._clock_ns()

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._mode:
            self._opt_end = self._clock_ns()

    def attach(self) -> None:
        """With DataloaderProfilingConfig, install the DataLoader probe (hook._dataloader) now:
        a script iterates its loader before the model's first step. (torch's global optimizer
        step hooks are installed at the first step.)"""
        if self.dataloader is not None:
            from sdlocal.hook import _dataloader

            _dataloader.install(self)

    def detach(self) -> None:
        """Remove every process-wide probe (optimizer hooks, DataLoader probe)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        if self.dataloader is not None:
            from sdlocal.hook import _dataloader

            _dataloader.uninstall()

    def record(self, phase: str, name: str, start_us: int, end_us: int,
               args: Mapping[str, Any] | None = None) -> None:
        """Any event, from any thread (smdebug's `record_trace_events`)."""
        self._events.append((phase, name, int(start_us), int(end_us), args))
        if self._thread is None:
            self._start_thread()

    def dataloader_active(self) -> bool:
        """Whether data-loading events are recorded now: the data fetched during step N is for
        step N + 1 (smdebug checks the next step against DataloaderProfilingConfig's range)."""
        tracker = self.dataloader
        return tracker is not None and tracker.active(self.step + 1)

    def dataloader_matches(self, phase: str, name: str) -> bool:
        """MetricsRegex matches the event's phase or name (cached per pair)."""
        key = (phase, name)
        ok = self._dataloader_names.get(key)
        if ok is None:
            cfg = self.config.dataloader
            ok = cfg is not None and (cfg.matches(phase) or cfg.matches(name))
            self._dataloader_names[key] = ok
        return ok

    def _emit_step(self) -> None:
        self._events.append((None, self._mode, self._mode_step, self._name, self._start_us,
                             self._fwd_end, self._opt_start, self._opt_end))
        self._mode = 0

    # ------------------------------------------------------------------ writing
    def _start_thread(self) -> None:
        self._stop.clear()
        t = threading.Thread(target=self._run, name="sdlocal-timeline", daemon=True)
        self._thread = t
        t.start()

    def _run(self) -> None:
        while not self._stop.wait(self._drain_interval_s):
            self.drain()

    def drain(self) -> None:
        """Write every queued event and apply the rotation policy (the writer thread's work)."""
        with self._write_lock:
            events = self._events
            n = len(events)
            if n and not self._healthy:
                for _ in range(n):
                    events.popleft()
                self.events_dropped += n
                return
            writer = self._writer
            if n and writer is None:
                writer = self._writer = TraceWriter(
                    self.root, self._node or node_id(), suffix=PYTHON_TIMELINE_SUFFIX,
                    max_file_size=self.config.max_file_size, close_interval_s=self.config.close_interval_s,
                    clock_us=self.clock_us, start_time_us=self.start_time_us)
            if n:
                assert writer is not None
                batch = _expand([events.popleft() for _ in range(n)])
                try:
                    self.events_written += writer.record_many(batch)
                    self._open_failures = 0
                except (TypeError, ValueError) as e:  # args that are not JSON (a script's own events)
                    self.events_dropped += len(batch)
                    logger.error("sdlocal profiler: %d trace events not written: %r", len(batch), e)
                except OSError as e:
                    self.events_dropped += len(batch)  # at most: a write that failed midway kept some
                    self._write_failed(e)
                    if not self._healthy:
                        self.events_dropped += len(events)
                        events.clear()
                        return
            if writer is not None:
                try:
                    writer.close_if_due()
                except OSError as e:
                    self._write_failed(e)

    def _write_failed(self, e: OSError) -> None:
        # smdebug: after FileOpenFailThreshold failed attempts in a row (here: one per batch) the
        # writer is unhealthy and every later event is dropped; training goes on.
        self._open_failures += 1
        if self._open_failures >= self.config.file_open_fail_threshold:
            self._healthy = False
            logger.warning("sdlocal profiler: %d failures in a row writing trace files under %s (last: %s); "
                           "no more framework events are recorded", self._open_failures, self.root, e)
        else:
            logger.debug("sdlocal profiler: writing a trace event failed: %s", e)

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> list[Path]:
        """Emit the step in progress, write everything and close the open file (its final name).
        Events recorded later start a new file. Returns the files closed so far."""
        if self._mode:
            self._emit_step()
        if self.detailed is not None:
            self.detailed.stop()
        if self.dataloader is not None:
            from sdlocal.hook import _dataloader

            _dataloader.flush_workers()
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join(timeout_s)
            if thread.is_alive():
                logger.warning("sdlocal profiler: the timeline writer did not stop within %.0f s", timeout_s)
        self.drain()
        with self._write_lock:
            if self._writer is not None:
                try:
                    self._writer.flush()
                except OSError as e:
                    self._write_failed(e)
            return list(self._writer.closed_files) if self._writer is not None else []


# ---------------------------------------------------------------------- the process's timeline
_configured = False
_current: Timeline | None = None


def configure(config: ProfilerConfig | None) -> Timeline | None:
    """Set the process's profiler config (`python -m sdlocal.hook.run` does, before the script runs);
    returns its timeline, None when profiling is disabled."""
    global _configured, _current
    _configured = True
    if _current is not None:
        shutdown()
    _current = Timeline(config) if config is not None and config.enabled else None
    if _current is not None:
        _current.attach()
    return _current


def current() -> Timeline | None:
    """The process's timeline; the first call without `configure()` reads the job's config file
    (a bad file is logged, and profiling stays off: a script's hook must not stop training)."""
    if not _configured:
        try:
            config = ProfilerConfig.load()
        except HookConfigError as e:
            logger.error("sdlocal profiler: bad profiler config %s: %s; framework metrics are off",
                         ProfilerConfig.default_path(), e)
            config = None
        configure(config)
    return _current


def close_current() -> None:
    """Close the process's timeline files (it stays usable: a later event opens a new file)."""
    if _current is not None:
        _current.close()


def shutdown() -> None:
    """Close the timeline, remove the data-loader probe and forget the config (tests, hook.run)."""
    global _configured, _current
    tl, _current = _current, None
    _configured = False
    if tl is not None:
        tl.detach()
        tl.close()
