"""perfmodel profile: measure a model over batch sizes and input sizes into one profile CSV."""

from __future__ import annotations

import argparse

from perfmodel import console, exit_codes
from perfmodel.commands.common import Terminated, formatter, positive, sigterm_as_interrupt
from perfmodel.errors import InputError, PerfmodelError

# The library parameters (ProfileConfig's, TritonOptions') whose flag has another name (console.for_the_command_line:
# errors and progress text name parameters).
PARAMETER_FLAGS = {
    "worker_timeout_s": "--worker-timeout",
    "call_timeout_s": "--call-timeout",
    "drift_probe_s": "--drift-probe",
    "protocols": "--protocol",
    "modes": "--mode",
    "concurrencies": "--concurrency",
    "request_timeout_s": "--request-timeout",
    "server_timeout_s": "--server-timeout",
    "rates": "--rate",
    "duration_s": "--duration",
}

PROFILE_EXAMPLES = """examples:
  perfmodel profile --model resnet50 --device cpu --batch-sizes 1,2,4 --input-sizes 64,96 --out /tmp/p.csv
  perfmodel profile --model efficientnet_b0 --device cuda --precision fp16 --batch-sizes auto \\
                    --input-sizes 224,320 --out /tmp/h100-efficientnet_b0-torch-fp16.csv
  perfmodel profile --model my_model.pt --device cuda --batch-sizes 1,8,64 --out /tmp/mine.csv --resume
  perfmodel profile --model resnet50 --backend triton --protocol grpc --mode async --concurrency 1,4 \\
                    --batch-sizes 1,2 --input-sizes 64 --device cpu --out /tmp/t.csv
  perfmodel profile --model resnet50 --backend triton --url 10.0.0.2:8001 --protocol grpc --out /tmp/remote.csv
  perfmodel profile --model resnet50 --batch-sizes 1,8,32 --input-sizes 64 --alongside 1 --out /tmp/two-workers.csv
  perfmodel profile --model resnet50 --batch-sizes 1,8,32 --input-sizes 64 --processes 3 --out /tmp/three.csv
  perfmodel profile --model resnet50 --device cuda --precision fp16 --batch-sizes auto --search-tolerance 10% \\
                    --fresh-warmup-at 1,16,256 --input-sizes 224,320,448 --out /tmp/h100-resnet50-fp16.csv --estimate
  perfmodel profile --model tiny --backend triton --rate 50,100,200/s --max-batch-size 16 \\
                    --max-queue-delay 1ms --input-sizes 64 --out /tmp/rates.csv
  perfmodel profile --model resnet50 --backend triton --rate 400/s --triton-config model_repository/resnet50/ \\
                    --input-sizes 64 --out /tmp/planned.csv

Each point is written as soon as it is measured; after an interruption (Ctrl-C, SIGTERM), run the same
command with --resume to measure only what is missing.
"""


def _fraction(text: str) -> float:
    from perfmodel.units import parse_fraction

    try:
        return parse_fraction(text, "the tolerance")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).rstrip(".")) from None


def _batch_list(text: str) -> tuple[int, ...]:
    from perfmodel.profile.grid import parse_positive_ints

    try:
        return parse_positive_ints(text, "the list", "1,16,256")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).rstrip(".")) from None


def add_parser(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="measure latency, warm-up and memory over batch size and input size",
        description="Measure a model's latency distribution, warm-up and memory for each batch size and input "
        "size, and write them as one profile CSV.",
        epilog=PROFILE_EXAMPLES + "\n" + exit_codes.help_text("profile"),
        formatter_class=formatter,
    )
    p.add_argument("--model", required=True, help="resnet50, efficientnet_b0, tiny, or a TorchScript file (.pt)")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="the profile CSV to write")
    p.add_argument(
        "--backend",
        default="torch",
        choices=["torch", "triton"],
        help="torch: called in-process; triton: through a Triton Inference Server (default: torch)",
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument(
        "--batch-sizes",
        default=None,
        metavar="LIST",
        help="e.g. 1,2,4,8, or 'auto': double from 1 until a batch does not fit (out of memory), then "
        "bisect to the largest batch that does (default: 1,2,4,8); with --rate: images per request "
        "(default: 1)",
    )
    p.add_argument(
        "--input-sizes", default="224", metavar="LIST", help="square image sides in pixels, e.g. 224,320 (default: 224)"
    )
    p.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "tf32", "fp16", "bf16"],
        help="fp32 is true fp32 (TF32 off); tf32: fp32 tensors, TF32 tensor-core math (CUDA) (default: fp32)",
    )
    p.add_argument("--channels-last", action="store_true", help="run in channels-last memory format")
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model: one static graph per batch size, compiled by the first call (the "
        "warm-up) into a fresh cache",
    )
    p.add_argument(
        "--compile-mode",
        default=None,
        choices=["default", "reduce-overhead", "max-autotune"],
        help="torch.compile's mode, with --compile: reduce-overhead and max-autotune capture CUDA graphs of "
        "their own (reduce-overhead: CUDA only) (default: default)",
    )
    p.add_argument("--cuda-graphs", action="store_true", help="replay a captured CUDA graph per batch size (CUDA only)")
    p.add_argument(
        "--warmup",
        default="fresh-process",
        choices=["fresh-process", "in-process"],
        help="measure the first call in a fresh worker process per point (default), or in the process "
        "that measures the steady state",
    )
    p.add_argument(
        "--fresh-warmup-at",
        type=_batch_list,
        default=None,
        metavar="LIST",
        help="measure the warm-up in fresh processes only at these batch sizes, e.g. 1,16,256 (other "
        "points: steady state only, warmup_ms empty); the way to fit a GPU sweep into minutes",
    )
    p.add_argument(
        "--threads",
        type=positive("", whole=True),
        default=None,
        metavar="N",
        help="torch threads (default: 1 on CPU, torch's default on CUDA)",
    )
    p.add_argument(
        "--alongside",
        type=positive("", whole=True, allow_zero=True),
        default=0,
        metavar="N",
        help="CPU: time every point while N more workers run the same model and batch on this machine, as "
        "when a plan puts N + 1 workers on it (they share its cores and memory bandwidth) (default: 0)",
    )
    p.add_argument(
        "--processes",
        type=positive("", whole=True),
        default=1,
        metavar="K",
        help="measure every point's steady state in K processes (the measuring worker and K - 1 fresh ones, "
        "each loading the model) and write the mean of their figures: on a CPU a process's speed is one "
        "draw; `process_rel_sd` says how far the K disagreed; the "
        "steady-state part takes K times as long (default: 1; torch backend only)",
    )
    p.add_argument(
        "--drift-probe",
        default=None,
        metavar="T",
        help="before the sweep, time one small batch back to back for T to measure how much this machine's "
        "speed drifts (drift_rel_sd, drift_corr_s: plans use it for their deadline probability); 0 for none "
        "(default: 20s on a CPU, 5s on CUDA; torch backend only)",
    )
    p.add_argument(
        "--hardware",
        default=None,
        metavar="KEY",
        help="pool key for this device (default: from its name: h100, a100, cpu ...)",
    )
    p.add_argument(
        "--max-batch-size",
        type=positive("", whole=True),
        default=None,
        metavar="N",
        help="auto: largest batch to try (default: 1024 on CPU, 16384 on CUDA); with --rate: the "
        "server's dynamic batcher's largest batch (default: 64)",
    )
    p.add_argument(
        "--max-call-ms",
        type=positive("milliseconds"),
        default=None,
        metavar="MS",
        help="auto: stop growing after a call this slow (default: 2000 on CPU, no limit on CUDA)",
    )
    p.add_argument(
        "--search-tolerance",
        type=_fraction,
        default=0.0,
        metavar="FRACTION",
        help="auto: stop bisecting once the largest batch that runs is known within this fraction, "
        "e.g. 10%% (default: 0, exact)",
    )
    p.add_argument(
        "--memory-limit-mb",
        type=positive("MiB"),
        default=None,
        metavar="MB",
        help="the memory budget, over which a batch counts as out-of-memory: on a CPU the process's "
        "data (default: half the free memory); on CUDA the device memory each worker may use, "
        "to profile a smaller GPU (default: all of it)",
    )
    p.add_argument(
        "--max-time-per-point",
        type=positive("seconds"),
        default=10.0,
        metavar="S",
        help="stop sampling a point after this many seconds (default: 10)",
    )
    p.add_argument(
        "--max-time-short-calls",
        type=positive("seconds"),
        default=None,
        metavar="S",
        help="a point whose calls are short (20 or more fit in --max-time-per-point) and whose median is not "
        "known to +-1%% by then may sample up to this long: launch-bound batches on a GPU are noisy, large "
        "ones steady (default: --max-time-per-point)",
    )
    p.add_argument(
        "--call-timeout",
        type=positive("seconds"),
        default=300.0,
        metavar="S",
        help="a model call (or a point's set-up) that has not returned after this long fails its point, "
        "and the sweep goes on (default: 300)",
    )
    p.add_argument(
        "--worker-timeout",
        type=positive("seconds"),
        default=900.0,
        metavar="S",
        help="longest a fresh warm-up process may take, from its start to its answer (default: 900)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the sweep already in --out, measuring only the points of this sweep not yet in it "
        "(other rows of the file, e.g. another model's, are kept)",
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print how many points the sweep has and how long it may take, then exit without measuring",
    )
    t = p.add_argument_group(
        "--backend triton",
        "Without --url, perfmodel starts a Triton server on 127.0.0.1 and stops it "
        "afterwards; --warmup fresh-process starts a fresh one per input size and batch size.",
    )
    t.add_argument("--protocol", default=None, metavar="LIST", help="http, grpc or http,grpc (default: grpc)")
    t.add_argument("--mode", default=None, metavar="LIST", help="sync, async or sync,async (default: sync)")
    t.add_argument("--concurrency", default=None, metavar="LIST", help="requests in flight, e.g. 1,4,16 (default: 1)")
    t.add_argument("--url", default=None, metavar="HOST:PORT", help="measure a running server instead of starting one")
    t.add_argument(
        "--architecture",
        default=None,
        choices=["local-server", "remote-server"],
        help="the profile's architecture (default: remote-server for a --url host off this machine)",
    )
    t.add_argument(
        "--server-model", default=None, metavar="NAME", help="the model's name on the server (default: --model's)"
    )
    t.add_argument(
        "--request-timeout",
        type=positive("seconds"),
        default=None,
        metavar="S",
        help="longest wait for one request (default: 60)",
    )
    t.add_argument(
        "--server-timeout",
        type=positive("seconds"),
        default=None,
        metavar="S",
        help="longest wait for a local server to be ready (default: 180)",
    )
    t.add_argument(
        "--rate",
        default=None,
        metavar="LIST",
        help="open-loop load instead of a concurrency: requests/s, e.g. 50,100,200/s; "
        "the local server batches dynamically",
    )
    t.add_argument(
        "--duration",
        default=None,
        metavar="T",
        help="with --rate: time counted per rate, after a warm-up (default: 20s)",
    )
    t.add_argument(
        "--max-queue-delay",
        default=None,
        metavar="T",
        help="with --rate: the dynamic batcher's delay, e.g. 1ms (default: 0)",
    )
    t.add_argument(
        "--triton-config",
        default=None,
        metavar="DIR",
        help="with --rate: the batcher settings of DIR/config.pbtxt (e.g. written by perfmodel plan --mode online)",
    )
    t.add_argument(
        "--server-cpus",
        default=None,
        metavar="LIST",
        help="run the local server on these CPU cores, e.g. 1 or 2-3, and the load generator on the others, "
        "so that the generator cannot slow the server (Linux; default: both anywhere)",
    )
    p.add_argument("--json", action="store_true", help="print the profile as JSON on stdout")
    p.set_defaults(run=run)


def _drift_probe(args) -> float | None:
    from perfmodel.units import parse_duration

    if args.drift_probe is None:
        return 0.0 if args.backend == "triton" else None
    seconds = parse_duration(args.drift_probe, "--drift-probe", allow_zero=True)
    if seconds > 0 and args.backend == "triton":
        raise InputError("--drift-probe is for --backend torch; leave it out (or give 0) with --backend triton.")
    return seconds


def run(args) -> int:
    from perfmodel.profile import ProfileConfig, StabilityRule, estimate_profile, run_profile
    from perfmodel.profile.config import duration_text
    from perfmodel.profile.grid import parse_batch_sizes, parse_input_sizes
    from perfmodel.readers import output_file

    output_file(args.out, "--out")  # before the model is built or a server started (the sweep checks it again)
    triton = _triton_options(args)
    if args.max_time_short_calls is not None and args.max_time_short_calls < args.max_time_per_point:
        raise InputError(
            f"--max-time-short-calls ({args.max_time_short_calls:g} s) is less than --max-time-per-point "
            f"({args.max_time_per_point:g} s): it gives short calls more time, not less; make it at least that, "
            "or leave it out."
        )
    config = ProfileConfig(
        model=args.model,
        device=args.device,
        batch_sizes=parse_batch_sizes(
            args.batch_sizes if args.batch_sizes is not None else ("1" if args.rate else "1,2,4,8")
        ),
        input_sizes=parse_input_sizes(args.input_sizes),
        precision=args.precision,
        channels_last=args.channels_last,
        compile=args.compile,
        compile_mode=args.compile_mode or "default",
        cuda_graphs=args.cuda_graphs,
        warmup=args.warmup,
        fresh_warmup_at=args.fresh_warmup_at,
        threads=args.threads,
        alongside=args.alongside,
        processes=args.processes,
        drift_probe_s=_drift_probe(args),
        hardware=args.hardware,
        rule=StabilityRule(max_time_s=args.max_time_per_point, short_calls_time_s=args.max_time_short_calls),
        max_batch_size=args.max_batch_size,
        max_call_ms=args.max_call_ms,
        search_tolerance=args.search_tolerance,
        memory_limit_mb=args.memory_limit_mb,
        worker_timeout_s=args.worker_timeout,
        call_timeout_s=args.call_timeout,
        backend=args.backend,
        backend_options=triton,
    )
    if args.estimate:
        plan = estimate_profile(config)
        summary = console.for_the_command_line(plan.describe(), args.flag_names)
        if args.resume:  # the estimate does not read --out
            summary += f"; that is the whole sweep: --resume measures only the points not yet in {args.out}"
        if args.json:
            console.print_json(
                {
                    "points": plan.points,
                    "points_is_bound": plan.bound,
                    "fresh_workers": plan.fresh_workers,
                    "sampling_s_max": plan.sampling_s,
                    **_calls_json(plan),
                    "summary": summary,
                    **({"processes": plan.processes} if plan.processes > 1 else {}),
                }
            )
        else:
            console.note(f"{args.model}: {summary}")
        return 0
    new_points = []
    counted = {"done": 0, "total": None}  # the sweep's last point event: is anything left after an interrupt?
    with sigterm_as_interrupt():  # finished points kept, workers and servers stopped
        try:
            with console.progress(f"profiling {args.model}") as update:

                def on_progress(event) -> None:
                    message = console.for_the_command_line(event.message, args.flag_names)  # library text
                    if event.kind == "start":
                        console.note(f"planned: {message}")
                    elif event.kind == "point":
                        counted.update(done=event.done, total=event.total)
                        state = "from file" if event.resumed else event.status
                        load = f", {message}" if message else ""
                        eta = f" (about {duration_text(event.eta_s)} left)" if event.eta_s is not None else ""
                        where = f"{event.input_size} px, batch {event.batch_size}{load}"
                        update(event.done, event.total, f"{where}: {state}{eta}")
                        if not event.resumed:
                            new_points.append(event.status)
                    elif event.kind == "search":
                        console.note(f"{event.input_size} px: {message}")

                df = run_profile(config, args.out, resume=args.resume, on_progress=on_progress)
        except KeyboardInterrupt as exc:
            what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            finished = counted["total"] is not None and counted["done"] >= counted["total"]
            console.error(f"{what}: {_saved(args.out, len(new_points), finished)}")
            return exit_codes.TERMINATED if isinstance(exc, Terminated) else exit_codes.INTERRUPTED
    if new_points and all(s == "error" for s in new_points):
        first = df.loc[df["status"] == "error", "error"].iloc[-1]
        raise PerfmodelError(f"no point could be measured; the last error was: {first}")
    _warn_unstable(df, config.rule)
    _warn_late_sender(df)
    if args.json:
        console.print_json({"out": args.out, "rows": console.clean_for_json(df.to_dict("records"))})
    else:
        _print_profile(df)
        console.note(f"wrote {len(df)} point(s) to {args.out} ({len(new_points)} measured now)")
    return 0


def _calls_json(plan) -> dict:
    """--estimate --json: what the calls add, and at which call time (none for a backend whose points are bounded)."""
    if not plan.slowest:
        return {}
    return {
        "process_starts": plan.fresh_workers + plan.extra_workers + 1,
        "slowest_call": plan.slowest,
        # at slowest_call_s, or (null) per second of the slowest call
        "slowest_call_s": plan.slowest_s,
        "calls_s": plan.calls_s * plan.processes,
        "measuring_s": plan.measuring_s,
    }


def _saved(out: str, new: int, finished: bool = False) -> str:
    """What an interrupted sweep left: one sentence that names only a file that exists, and --resume only
    when something is left to measure (`finished`: the last point was done)."""
    from pathlib import Path

    from perfmodel.schema import load_profile

    if not Path(out).exists():
        return "stopped before the first point was measured; nothing was written."
    try:
        held = f"{out} holds {len(load_profile(out))} point(s)"
    except PerfmodelError:
        held = f"{out} keeps what was measured"
    if finished:
        return f"{new} new point(s) were measured and {held}: every point of the sweep is done."
    return f"{new} new point(s) were measured and {held}; run the same command with --resume to measure the rest."


TRITON_ONLY = (
    "protocol",
    "mode",
    "concurrency",
    "url",
    "architecture",
    "server_model",
    "request_timeout",
    "server_timeout",
    "rate",
    "duration",
    "max_queue_delay",
    "triton_config",
    "server_cpus",
)


def _triton_options(args):
    """TritonOptions for --backend triton; None for torch (where the triton options make no sense)."""
    given = [f"--{name.replace('_', '-')}" for name in TRITON_ONLY if getattr(args, name) is not None]
    if args.backend != "triton":
        if given:
            raise InputError(
                f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for --backend triton; "
                "add --backend triton, or leave them out."
            )
        return None
    if args.alongside:
        raise InputError(
            "--alongside is for --backend torch (workers in processes of their own); leave it out with "
            "--backend triton."
        )
    from perfmodel.profile.affinity import parse_cpus
    from perfmodel.profile.backends.triton_backend import TritonOptions
    from perfmodel.profile.grid import parse_positive_ints

    def names(text: str | None, default: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.strip().lower() for v in (text or default).split(",")))

    rate_options = _rate_options(args)
    return TritonOptions(
        **rate_options,
        protocols=names(args.protocol, "grpc"),
        modes=names(args.mode, "sync"),
        concurrencies=parse_positive_ints(args.concurrency or "1", "--concurrency", "1,4,16"),
        url=args.url,
        architecture=args.architecture,
        server_model=args.server_model,
        request_timeout_s=args.request_timeout if args.request_timeout is not None else 60.0,
        server_timeout_s=args.server_timeout if args.server_timeout is not None else 180.0,
        server_cpus=parse_cpus(args.server_cpus) if args.server_cpus is not None else (),
    )


def _rate_options(args) -> dict:
    """--rate and its settings, for TritonOptions (nothing without --rate)."""
    given = [
        f"--{n.replace('_', '-')}"
        for n in ("duration", "max_queue_delay", "triton_config")
        if getattr(args, n) is not None
    ]
    if args.rate is None:
        if given:
            raise InputError(
                f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for --rate; add --rate, or leave them out."
            )
        return {}
    from perfmodel.profile.backends.triton_rate import DEFAULT_MAX_BATCH, Batching
    from perfmodel.units import parse_duration, parse_rates

    closed = [f"--{n}" for n in ("mode", "concurrency") if getattr(args, n) is not None]
    if closed:
        raise InputError(
            f"{' and '.join(closed)} set a closed loop; --rate sends open-loop: leave {' and '.join(closed)} out."
        )
    if args.triton_config is not None:
        if args.max_batch_size is not None or args.max_queue_delay is not None:
            raise InputError("give either --triton-config or --max-batch-size/--max-queue-delay: both set the batcher.")
        from perfmodel.planning.triton_config import read_batching

        settings = read_batching(args.triton_config)
        batching = Batching(settings.max_batch_size, settings.max_queue_delay_us, settings.preferred_batch_sizes)
    else:
        delay = (
            0.0
            if args.max_queue_delay is None
            else parse_duration(args.max_queue_delay, "--max-queue-delay", allow_zero=True)
        )
        largest = DEFAULT_MAX_BATCH if args.max_batch_size is None else args.max_batch_size
        if largest < 1:
            raise InputError("--max-batch-size must be a positive whole number.")
        batching = Batching(largest, int(round(delay * 1e6)))
    return {
        "rates": parse_rates(args.rate),
        "batching": batching,
        "duration_s": 20.0 if args.duration is None else parse_duration(args.duration, "--duration"),
    }


def _warn_late_sender(df, limit_ms: float = 10.0) -> None:
    """Open-loop rows whose sender fell behind its schedule: the client machine was too busy for the rate."""
    if "sender_lag_p99_ms" not in df.columns:
        return
    late = df[df["sender_lag_p99_ms"].astype(float) > limit_ms]
    if len(late):
        console.note(
            f"warning: at {len(late)} rate(s) the sender was more than {limit_ms:g} ms behind its schedule for 1% of "
            f"the requests (worst {late['sender_lag_p99_ms'].max():.3g} ms; sender_lag_p99_ms): the client machine "
            "is too busy for those rates, so the requests came burstier than a Poisson process."
        )


def _warn_unstable(df, rule) -> None:
    """One line for all points whose median did not settle (a busy machine), not one per point."""
    if "stable" not in df.columns:
        return
    ok = df[df["status"] == "ok"]
    unstable = ok[ok["stable"].astype(str).str.lower() == "false"]
    if len(unstable):
        worst = unstable["latency_ci_rel"].max() if "latency_ci_rel" in unstable.columns else float("nan")
        console.note(
            f"warning: {len(unstable)} of {len(ok)} point(s) did not reach a median known to +-1% "
            f"(worst +-{worst:.1%}) within {rule.max_time_s:g} s"
            + (f" ({rule.longest_s:g} s for short calls)" if rule.longest_s > rule.max_time_s else "")
            + "; the machine may be busy (see the load_avg_1m column), or allow more time with "
            "--max-time-per-point (--max-time-short-calls for short calls)."
        )


def _print_profile(df) -> None:
    columns = [
        "input_size",
        "batch_size",
        "mode",
        "concurrency",
        "rate_per_s",
        "status",
        "latency_ms",
        "latency_p99_ms",
        "warmup_ms",
        "memory_mb",
        "throughput_ips",
        "achieved_rate_per_s",
        "server_batch_mean",
        "kept_up",
    ]
    headers = dict(
        zip(
            columns,
            [
                "size px",
                "batch",
                "mode",
                "in flight",
                "rate/s",
                "status",
                "median ms",
                "p99 ms",
                "warm-up ms",
                "memory MiB",
                "images/s",
                "answered/s",
                "server batch",
                "kept up",
            ],
        )
    )
    for key, group in df.groupby(["hardware", "model", "backend", "precision"], sort=False):
        shown = [
            c
            for c in columns
            if c in group.columns and group[c].astype(str).str.strip().ne("").any() and not group[c].isna().all()
        ]
        order = [c for c in ("input_size", "batch_size", "mode", "concurrency", "rate_per_s") if c in shown]
        rows = group.sort_values(order)[shown]
        console.table(" ".join(str(k) for k in key), [headers[c] for c in shown], rows.itertuples(index=False))
