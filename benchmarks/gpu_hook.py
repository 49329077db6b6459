"""What sdlocal's PyTorch hook costs a training step on a GPU, beside the floor the machine sets.

    python benchmarks/gpu_hook.py                     # CUDA when there is one, else the CPU preset
    python benchmarks/gpu_hook.py --device cpu        # a couple of minutes on 2 cores
    bash benchmarks/gpu_session.sh                    # a GPU session: the CUDA tests, then this

Needs torch, numpy and the hook's own dependencies (tensorboard's protobufs) only: no S3, no
docker, nothing built. ResNet-18 (torchvision's when it imports, else a built-in one with the same
layers and parameters: the bytes saved are the same), batch 128, 128x128 inputs, SGD with
momentum, random data on the device. Configurations: no hook; the hook saving weights, biases,
gradients and losses every 100, 10 and 1 steps; the framework timeline alone (a ProfilerConfig,
no tensors). Each round runs every configuration once, in a shuffled order, in this one process
(the model and the data stay on the device). Each step ends with `loss.item()`, as training loops
that log their loss do, so a step's time is the device's; the hook's `close()` (draining its
writer) is timed too and counted in "mean incl. drain", the figure the ratios use.

The floor (benchmarks/gpu_hook_floor.py): bytes per saved step (the events files written) over
the device-to-host bandwidth into pinned memory, and over the buffered sequential write bandwidth
of the output folder, both measured here. A perfectly overlapped saver still needs
max(step without hook, (copy or write time of a saved step) / save_interval) per step: "floor
ms/step". Each trial is checked (every due step, every tensor) and removed.
Targets (issue 22, ResNet-18 on an H100/H200): interval 100 and timeline <= x1.01 of no hook;
interval 10 <= x1.05; interval 1 <= max(1.2 x floor, 1.5 x no hook).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from benchmarks import gpu_hook_floor, gpu_hook_report  # noqa: E402
from benchmarks.errors import BenchmarkError  # noqa: E402
from benchmarks.gpu_hook_model import make_model, parameter_count  # noqa: E402
from benchmarks.settings import DEFAULT_RESULTS_DIR  # noqa: E402

COLLECTIONS = ("weights", "biases", "gradients", "losses")
CONFIGS = ("none", "100", "10", "1", "timeline")


@dataclass(frozen=True)
class GpuBenchSettings:
    device: str
    model: str
    batch: int
    size: int
    classes: int
    steps: int  # timed steps per run
    warmup: int
    rounds: int
    probe_mib: int  # size of the bandwidth probes
    threads: int  # torch threads (CPU runs: leave a core to the writer); 0: torch's default

    def __post_init__(self) -> None:
        for name in ("batch", "size", "steps", "rounds", "probe_mib"):
            if getattr(self, name) < 1:
                raise BenchmarkError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")


GPU = GpuBenchSettings("cuda", "resnet18", 128, 128, 1000, steps=100, warmup=20, rounds=3, probe_mib=1024, threads=0)
CPU = GpuBenchSettings("cpu", "mini", 32, 32, 10, steps=60, warmup=5, rounds=3, probe_mib=128,
                       threads=max(1, (os.cpu_count() or 2) - 1))


@dataclass
class Workload:
    model: nn.Module
    loss_fn: nn.Module
    opt: torch.optim.Optimizer
    batches: list[tuple[torch.Tensor, torch.Tensor]]
    device: torch.device


def build(s: GpuBenchSettings, model: nn.Module) -> Workload:
    device = torch.device(s.device)
    model = model.to(device)
    gen = torch.Generator(device=device).manual_seed(0)
    batches = [(torch.randn(s.batch, 3, s.size, s.size, device=device, generator=gen),
                torch.randint(0, s.classes, (s.batch,), device=device, generator=gen)) for _ in range(4)]
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return Workload(model, nn.CrossEntropyLoss(), opt, batches, device)


def _train(w: Workload, total: int) -> list[float]:
    """`total` steps; the clock after each (and before the first)."""
    stamps = [time.perf_counter()]
    for i in range(total):
        x, y = w.batches[i % len(w.batches)]
        w.opt.zero_grad(set_to_none=True)
        loss = w.loss_fn(w.model(x), y)
        loss.backward()
        w.opt.step()
        loss.item()  # the step ends when the device is done with it
        stamps.append(time.perf_counter())
    return stamps


def _hook(config: str, out: Path) -> Any:
    from sdlocal.hook.config import HookConfig
    from sdlocal.hook.pytorch import Hook

    return Hook(HookConfig.from_dict({
        "LocalPath": str(out), "HookParameters": {"save_interval": config},
        "CollectionConfigurations": [{"CollectionName": c} for c in COLLECTIONS]}))


def _timeline(out: Path) -> tuple[Any, Any]:
    from sdlocal.hook import _timeline
    from sdlocal.hook._autoattach import TimelineHook
    from sdlocal.hook.profiler_config import ProfilerConfig

    tl = _timeline.configure(ProfilerConfig.from_dict({
        "ProfilingParameters": {"ProfilingIntervalInMilliseconds": "500", "LocalPath": str(out)},
        "DisableProfiler": False}))
    assert tl is not None
    return TimelineHook(tl), tl


def run_one(w: Workload, s: GpuBenchSettings, config: str, out: Path) -> dict[str, Any]:
    hook: Any = None
    tl: Any = None
    if config == "timeline":
        hook, tl = _timeline(out / "profiler")
    elif config != "none":
        hook = _hook(config, out / "tensors")
        hook.register_loss(w.loss_fn)
    if hook is not None:
        hook.register_module(w.model)
    total = s.warmup + s.steps
    stamps = _train(w, total)
    began = time.perf_counter()
    if hook is not None:
        hook.close()
    close_s = time.perf_counter() - began
    timed = stamps[s.warmup:]
    result: dict[str, Any] = {"config": config, "close_s": close_s,
                              "step_ms": [1e3 * (b - a) for a, b in zip(timed, timed[1:], strict=False)]}
    if tl is not None:
        from sdlocal.hook import _timeline as timeline_module

        result["timeline_events"] = tl.events_written
        timeline_module.shutdown()
        timeline_module.configure(None)
        if tl.events_written < total:
            raise BenchmarkError(f"the timeline wrote {tl.events_written} events for {total} steps")
    if config not in ("none", "timeline"):
        st = hook._saver.stats()
        result.update(check_trial(out / "tensors", total, int(config), parameters=len(list(w.model.parameters()))),
                      waited_s=st.waited_s, waits=st.waits, high_water=st.high_water, queue_limit=st.limit)
    return result


def check_trial(path: Path, total_steps: int, interval: int, parameters: int) -> dict[str, Any]:
    """Every due step has an events and an index file naming every parameter, gradient and the loss."""
    expected = [s for s in range(total_steps) if s % interval == 0]
    events = sorted(path.glob("events/*/*.tfevents"))
    steps = [int(p.name.split("_")[0]) for p in events]
    if steps != expected:
        raise BenchmarkError(f"{path}: saved steps {steps[:5]}... ({len(steps)}), expected {len(expected)}")
    for index in path.glob("index/*/*.json"):
        names = [t["tensorname"] for t in json.loads(index.read_text())["tensor_payload"]]
        if len(names) != 2 * parameters + 1:
            raise BenchmarkError(f"{index}: {len(names)} tensors, expected {2 * parameters + 1}")
    sizes = [p.stat().st_size for p in events]
    return {"saved_steps": len(steps), "bytes_per_saved_step": statistics.median(sizes)}


def machine_info(s: GpuBenchSettings, out_root: Path) -> dict[str, Any]:
    info: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "python": platform.python_version(),
        "torch": torch.__version__, "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
        "out_dir": str(out_root), "out_dir_free_gb": shutil.disk_usage(out_root).free / 1e9,
        "torch_threads": torch.get_num_threads(), "device": s.device}
    if s.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30)
            info["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 else "n/a"
        except (OSError, subprocess.TimeoutExpired, IndexError):
            info["driver"] = "n/a"
    else:
        info["cpu"] = platform.processor() or platform.machine()
    return info


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when available")
    p.add_argument("--model", choices=("resnet18", "resnet18-builtin", "mini"))
    for name in ("batch", "size", "steps", "warmup", "rounds", "probe-mib", "threads"):
        p.add_argument(f"--{name}", type=int)
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated among {', '.join(CONFIGS)}")
    p.add_argument("--out-dir", type=Path, help="where trials are written (default: a temporary folder)")
    p.add_argument("--results-dir", type=Path, default=DEFAULT_RESULTS_DIR)
    p.add_argument("--seed", type=int, default=0, help="seed of the configurations' order")
    return p.parse_args(argv)


def settings_from(args: argparse.Namespace) -> GpuBenchSettings:
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise BenchmarkError("--device cuda: torch sees no CUDA device here")
    base = GPU if device == "cuda" else CPU
    over = {"model": args.model, "batch": args.batch, "size": args.size, "steps": args.steps,
            "warmup": args.warmup, "rounds": args.rounds, "probe_mib": args.probe_mib, "threads": args.threads}
    return replace(base, **{k: v for k, v in over.items() if v is not None})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        s = settings_from(args)
        configs = [c.strip() for c in args.configs.split(",") if c.strip()]
        if not configs or not set(configs) <= set(CONFIGS):
            raise BenchmarkError(f"--configs: expected some of {', '.join(CONFIGS)}, got {args.configs!r}")
        if "none" not in configs:
            configs.insert(0, "none")  # every ratio needs it
        return _run(s, configs, args)
    except BenchmarkError as e:
        print(f"gpu_hook benchmark failed: {e}", file=sys.stderr)
        return 1


def _run(s: GpuBenchSettings, configs: list[str], args: argparse.Namespace) -> int:
    from sdlocal.hook import _timeline

    _timeline.configure(None)  # no profiler config read from the environment: the timeline run sets its own
    if s.threads:
        torch.set_num_threads(s.threads)
    chosen = make_model(s.model)
    w = build(s, chosen.model)
    params = parameter_count(w.model)
    parent = args.out_dir or Path(tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    out_root = Path(tempfile.mkdtemp(prefix="sdlocal-gpu-hook-", dir=parent))
    need = 2 * 4 * params * (s.warmup + s.steps) * 1.2
    if "1" in configs and shutil.disk_usage(out_root).free < need:
        raise BenchmarkError(f"{out_root}: {shutil.disk_usage(out_root).free / 1e9:.1f} GB free, an interval-1 run"
                             f" writes about {need / 1e9:.1f} GB: pass --out-dir elsewhere or fewer --steps")
    results: dict[str, Any] = {"settings": asdict(s), "model": chosen.description, "parameters": params,
                               "configs": configs, "machine": machine_info(s, out_root)}
    print(f"gpu_hook: {chosen.description}, {params:,} parameters, on {results['machine'].get('gpu', s.device)};"
          f" trials in {out_root}", flush=True)
    try:
        floor = gpu_hook_floor.measure(w.device, out_root, s.probe_mib << 20)
        results["floor"] = asdict(floor)
        print(f"  floor: {floor.copy_kind} {floor.copy_gbps:.2f} GB/s; write {floor.write_gbps:.2f} GB/s buffered,"
              f" {floor.write_fsync_gbps:.2f} GB/s with fsync", flush=True)
        _train(w, max(3, s.warmup))  # cudnn autotuning, allocator warm-up: outside every run
        rng = random.Random(args.seed)
        runs = []
        for round_no in range(s.rounds):
            order = configs[:]
            rng.shuffle(order)
            for config in order:
                out = out_root / f"r{round_no}-{config}"
                result = run_one(w, s, config, out)
                shutil.rmtree(out, ignore_errors=True)
                result["round"] = round_no
                runs.append(result)
                print(f"  round {round_no + 1}/{s.rounds} {config:>8}: median {statistics.median(result['step_ms']):7.2f}"
                      f" ms, mean {statistics.fmean(result['step_ms']):7.2f} ms, close {result['close_s']:.2f} s",
                      flush=True)
    finally:
        shutil.rmtree(out_root, ignore_errors=True)
    results["runs"] = runs
    results["machine"]["loadavg_end"] = os.getloadavg()
    results["summary"] = gpu_hook_report.summarize(runs, floor, s.steps)
    text = gpu_hook_report.markdown(results)
    results["markdown"] = text
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"gpu-hook-{s.device}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    print()
    print(text)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
