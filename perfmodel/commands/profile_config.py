"""perfmodel profile's flags read into the ProfileConfig its sweep runs, with the Triton backend's options:
the flags argparse leaves as text (durations, rates, lists) read here, and the flags that only go together."""

from __future__ import annotations

from perfmodel.errors import InputError

# The flags of the --backend triton group: refused with --backend torch.
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


def config(args):
    """The ProfileConfig the flags ask for; InputError for flags that do not go together."""
    from perfmodel.profile import ProfileConfig, StabilityRule
    from perfmodel.profile.grid import parse_batch_sizes, parse_input_sizes

    triton = _triton_options(args)
    if args.max_time_short_calls is not None and args.max_time_short_calls < args.max_time_per_point:
        raise InputError(
            f"--max-time-short-calls ({args.max_time_short_calls:g} s) is less than --max-time-per-point "
            f"({args.max_time_per_point:g} s): it gives short calls more time, not less; make it at least that, "
            "or leave it out."
        )
    return ProfileConfig(
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


def _drift_probe(args) -> float | None:
    from perfmodel.units import parse_duration

    if args.drift_probe is None:
        return 0.0 if args.backend == "triton" else None
    seconds = parse_duration(args.drift_probe, "--drift-probe", allow_zero=True)
    if seconds > 0 and args.backend == "triton":
        raise InputError("--drift-probe is for --backend torch; leave it out (or give 0) with --backend triton.")
    return seconds


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
