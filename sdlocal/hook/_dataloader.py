"""Data-loading events of torch.utils.data.DataLoader, with no change to the training script.

SageMaker's PyTorch containers shipped a DataLoader annotated for smdebug; here the same events
come from wrapping three methods of torch's DataLoader classes (the classes, not the user's
objects), installed only while DataloaderProfilingConfig is set (hook._timeline.configure):

- `DataLoaderIterInitialize`, name `<IteratorClass>.__init__` (`_SingleProcessDataLoaderIter`,
  `_MultiProcessingDataLoaderIter`): `iter(loader)` creating its iterator, worker start-up included;
- `DataLoaderIter`, name `<IteratorClass>::GetNext`: each batch the training loop waits for;
- `DataLoaderWorker`, name `<IteratorClass>.worker`: each worker process of a multi-process
  iterator, from the iterator's creation to its workers' shutdown (end of epoch, or the end of
  training for persistent workers); args `worker_id`, `pid`.
All carry args `num_workers` and `pin_memory` (smdebug's pandas analysis reads them), and are
recorded only in the config's step or time range and when MetricsRegex matches the phase or name.

Per batch outside the range the cost is one wrapper call and a range check. What happens inside
a worker process is not seen (the workers do not run the hook); their lifetime is.
"""
from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sdlocal.hook._timeline import Timeline

logger = logging.getLogger(__name__)

ITER_INIT = "DataLoaderIterInitialize"
ITER_NEXT = "DataLoaderIter"
WORKER = "DataLoaderWorker"

_timeline: Timeline | None = None
_originals: list[tuple[type, str, Any]] = []
# Multi-process iterators created while profiling: their workers' start time and whether any of
# their batches was recorded (their workers are recorded when they shut down).
_workers: weakref.WeakKeyDictionary[Any, list[Any]] = weakref.WeakKeyDictionary()


def _args(it: Any) -> dict[str, Any]:
    return {"num_workers": int(getattr(it, "_num_workers", 0)), "pin_memory": bool(getattr(it, "_pin_memory", False))}


def _want(tl: Timeline, phase: str, name: str) -> bool:
    return tl.dataloader_active() and tl.dataloader_matches(phase, name)


def install(timeline: Timeline) -> bool:
    """Wrap the DataLoader methods (once); False when this torch lacks one of them."""
    global _timeline
    _timeline = timeline
    if _originals:
        return True
    try:
        from torch.utils.data import dataloader as dl

        targets = [(dl.DataLoader, "_get_iterator"), (dl._BaseDataLoaderIter, "__next__"),
                   (dl._MultiProcessingDataLoaderIter, "_shutdown_workers")]
        originals = [(cls, name, cls.__dict__[name]) for cls, name in targets]
    except (ImportError, AttributeError, KeyError) as e:
        logger.info("sdlocal profiler: this torch's DataLoader cannot be observed (%r): no data-loading events", e)
        return False
    (_, _, get_iterator), (_, _, next_), (_, _, shutdown) = originals

    def _get_iterator(self: Any) -> Any:
        tl = _timeline
        if tl is None:
            return get_iterator(self)
        start = tl.clock_us()
        it = get_iterator(self)
        end = tl.clock_us()
        name = f"{type(it).__name__}.__init__"
        recorded = _want(tl, ITER_INIT, name)
        if recorded:
            tl.record(ITER_INIT, name, start, end, _args(it))
        if getattr(it, "_workers", None):
            _workers[it] = [start, recorded]
        return it

    def __next__(self: Any) -> Any:
        tl = _timeline
        if tl is None or not tl.dataloader_active():
            return next_(self)
        name = f"{type(self).__name__}::GetNext"
        if not tl.dataloader_matches(ITER_NEXT, name):
            return next_(self)
        start = tl.clock_us()
        data = next_(self)  # StopIteration (end of epoch) is not an event
        tl.record(ITER_NEXT, name, start, tl.clock_us(), _args(self))
        state = _workers.get(self)
        if state is not None:
            state[1] = True
        return data

    def _shutdown_workers(self: Any) -> None:
        state = _workers.pop(self, None)
        shutdown(self)
        if state is not None and state[1]:
            _record_workers(self, state[0])

    for (cls, name, _), wrapper in zip(originals, (_get_iterator, __next__, _shutdown_workers), strict=True):
        wrapper.__wrapped__ = getattr(cls, name)  # type: ignore[attr-defined]
        wrapper.__name__ = name
        setattr(cls, name, wrapper)
    _originals.extend(originals)
    return True


def _record_workers(it: Any, start_us: int) -> None:
    tl = _timeline
    if tl is None:
        return
    end = tl.clock_us()
    name = f"{type(it).__name__}.worker"
    args = _args(it)
    for i, w in enumerate(getattr(it, "_workers", None) or ()):
        tl.record(WORKER, name, start_us, end, {**args, "worker_id": i, "pid": getattr(w, "pid", None)})


def flush_workers() -> None:
    """Record the workers still running (persistent workers) as of now: the timeline closes."""
    for it, (start, recorded) in list(_workers.items()):
        if recorded:
            _record_workers(it, start)
        _workers.pop(it, None)


def uninstall() -> None:
    """Put torch's methods back."""
    global _timeline
    _timeline = None
    while _originals:
        cls, name, original = _originals.pop()
        setattr(cls, name, original)
    _workers.clear()
