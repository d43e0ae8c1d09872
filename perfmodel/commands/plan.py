"""perfmodel plan: how many GPUs, and which batch sizes, meet a deadline (or how much fits in one), or serve a
request rate within a latency SLO (--mode online).

This module is the parser (every flag of both modes, each read once into a number as it is parsed) and the
dispatch; plan_batch.py runs the batch modes (soft, relaxed), plan_online.py the online one."""

from __future__ import annotations

from perfmodel import exit_codes
from perfmodel.commands import plan_batch, plan_online
from perfmodel.commands.common import formatter, typed
from perfmodel.planning import arguments
from perfmodel.readers import given
from perfmodel.units import parse_pool, parse_prices

# The library parameters whose flag has another name (cli.for_the_command_line: errors name parameters).
PARAMETER_FLAGS = {
    "profiles": "--profile",
    "predictors": "--predictor",
    "prices": "--price",
    "decode": "--decode-time",
    "max_queue_delays": "--max-queue-delay",
}

PLAN_EXAMPLES = """examples:
  perfmodel plan --images 100000 --deadline 60s
  perfmodel plan --images 100k --deadline 1.5m --profile profiles/cpu-resnet50-torch.csv --input-size 64 --json
  perfmodel plan --mode relaxed --deadline 60s --pool cpu=8 --profile profiles/cpu-resnet50-torch.csv --input-size 64
  perfmodel plan --mix 224=70000,448=30000 --deadline 2m --pool h100=8,a100=16 --margin 5% --use p99
  perfmodel plan --images 1M --deadline 10m --pool h100=8,a100=16 --objective cost --price h100=4.5,a100=2.2
  perfmodel plan --images 100k --deadline 60s --pool a100=8 --precision fp16
  perfmodel plan --images 100k --deadline 60s --predictor h100.json --confidence 0.99
  perfmodel plan --images 100k --deadline 60s --confidence 0.5   # the median plan: a coin toss
  perfmodel plan --images 100k --deadline 60s --pool l4=4 --transfer   # an L4: nobody profiled one

units: deadlines 60s, 1.5m, 250ms, 2h (a bare number is seconds); images 100000, 100k, 1.5M;
margins 5% or 0.05. Each GPU loads the model once, runs its first batch (its warm-up time) and then
further batches; the last batch may be partly filled. With no --pool, every hardware type found is
available in any number and the plan says how many are needed. --objective cost assumes each GPU
used is paid for the whole deadline window.

deadline probability: a plan is a sum of batch times that vary, on a machine whose speed drifts, from
numbers known only so well; by default it keeps the deadline with probability 0.95 (--confidence), and
says its makespan's median and p95. --margin or --use p99 (without --confidence) plan on a fixed rule
instead and still report the probability.

data: with no --profile or --predictor, the shipped profiles: profiles/*.csv (this project's
measurements: its CPU, cpu, for CPU pools; an H100 and an H200, h100, h200) and profiles/reference/*.csv
(published GPU measurements: a100, a100-80gb, a30, a10, v100, v100-32gb, t4). The plan says per hardware type where its
numbers come from; published figures have no warm-up, so their first batch is timed as a steady one
(warmup_measured: false in --json), and on a GPU a load and a first call are added, from this project's
own GPU measurements and said to be a guess: the plan states the fixed costs' share of the deadline.
"""


ONLINE_EXAMPLES = """online serving (--mode online):
  perfmodel plan --mode online --rate 400/s --slo 100ms --percentile 99 --profile p.csv
  perfmodel plan --mode online --rate 20k/s --slo 30ms --pool h100=8,a100=16 --objective cost \\
                 --price h100=4.5,a100=2.2 --json
  perfmodel plan --mode online --rate 400/s --slo 100ms --triton-config model_repository/resnet50/
  perfmodel plan --mode online --rate 400/s --slo 100ms --ray-serve-config serve.json
  perfmodel plan --mode online --arrivals trace.csv --slo 50ms --request-size 4
  perfmodel plan --mode online --rate 400/s --slo 100ms --margin 10% --profile p.csv

rates 400/s, 20k/s, 1.5k/s, 24000/min; --arrivals: a CSV with a column arrival_s (seconds). Requests
arrive as a Poisson process (or as in the trace), a load balancer spreads them over the GPUs, and each
GPU runs Triton's dynamic batcher; latency = queueing + batching delay + batch service time.
--margin 10%: the plan holds the SLO even with every batch's server time 10% longer than profiled
(a machine whose speed drifts); the p50/p99 it predicts are those at the profiled speed.
"""

# Flags of the batch modes, with the value they have when not given (readers.given says whether one was typed).
BATCH_ONLY = {
    "images": None,
    "mix": None,
    "deadline": None,
    "use": "p50",
    "load_time": None,
    "max_batches": None,
    "gap": None,
    "time_limit": 10.0,
    "confidence": None,
    "decode_time": None,
    "extrapolate": False,
    "transfer": False,
}  # --margin serves both
ONLINE_ONLY = {
    "rate": None,
    "slo": None,
    "percentile": None,
    "request_size": None,
    "arrivals": None,
    "triton_config": None,
    "ray_serve_config": None,
    "max_queue_delay": None,
    "no_simulation": False,
}


def add_parser(sub) -> None:
    p = sub.add_parser(
        "plan",
        help="choose how many GPUs and which batch sizes meet a deadline (or, online, a latency SLO)",
        description="Choose how many GPUs of which type, and which mini-batch size on each, finish the images by "
        "the deadline (soft real-time), or finish as many as possible (relaxed). The answer is proven "
        "optimal by an integer program (Pyomo + HiGHS).",
        epilog=PLAN_EXAMPLES + "\n" + ONLINE_EXAMPLES + "\n" + exit_codes.help_text("plan"),
        formatter_class=formatter,
    )
    # Each flag is read once, as it is parsed, into the number the planners take (commands/common.typed), by
    # the check of the parameter it sets (planning/arguments.py); --mix is read with --images (its shares).
    p.add_argument(
        "--images",
        type=typed(_images),
        metavar="N",
        help="images to finish, e.g. 100000, 100k, 1.5M (relaxed mode: an upper limit)",
    )
    p.add_argument(
        "--deadline",
        type=typed(arguments.seconds, "deadline"),
        metavar="T",
        help="e.g. 60s, 1.5m, 250ms, 2h (soft and relaxed modes)",
    )
    p.add_argument(
        "--input-size",
        type=typed(arguments.input_size),
        metavar="PX",
        help="side of the square images in pixels (default: 224)",
    )
    p.add_argument(
        "--mix", metavar="SIZE=N,...", help="several input sizes: 224=70000,512=30000, or 224=70%%,512=30%% of --images"
    )
    p.add_argument(
        "--mode",
        default="soft",
        choices=["soft", "relaxed", "online"],
        help="soft: all images by the deadline; relaxed: as many as possible; online: requests at a rate "
        "within a latency SLO (default: soft)",
    )
    p.add_argument(
        "--objective",
        default="gpus",
        choices=["gpus", "cost"],
        help="fewest GPUs, or lowest cost (needs --price) (default: gpus)",
    )
    p.add_argument(
        "--pool",
        type=typed(_pool),
        metavar="TYPE=N,...",
        help="GPUs available, e.g. h100=8,a100=4 (default: any number of every type found)",
    )
    p.add_argument(
        "--price", type=typed(parse_prices), metavar="TYPE=P,...", help="price per GPU-hour, e.g. h100=4.5,a100=2.2"
    )
    p.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="FILE",
        help="a profile CSV: plan over its measured batch sizes (repeatable)",
    )
    p.add_argument(
        "--predictor",
        action="append",
        default=[],
        metavar="FILE",
        help="a predictor JSON: plan over every batch size up to max_batch (repeatable)",
    )
    p.add_argument(
        "--model",
        help="which model of the profiles or predictors (default: the only one, else resnet50); "
        "a TorchScript file plans for the model named by its stem and records the file for `perfmodel run`",
    )
    p.add_argument("--backend", help="only this backend (default: every backend measured; the solver picks)")
    p.add_argument("--precision", help="only this precision (default: every precision measured)")
    p.add_argument(
        "--use",
        default="p50",
        choices=["p50", "p99"],
        help="plan on the median or the 99th-percentile latency (default: p50)",
    )
    p.add_argument(
        "--margin",
        type=typed(arguments.fraction, "margin"),
        default=0.0,
        metavar="PCT",
        help="safety margin, e.g. 5%% (default: 0); batch modes: a fixed rule instead of --confidence, finish "
        "by deadline x (1 - margin), --margin 0 included; online: the SLO holds with every batch's server time "
        "that much longer",
    )
    p.add_argument(
        "--load-time",
        type=typed(arguments.seconds, "load_time", allow_zero=True),
        metavar="T",
        help="model load time per GPU (default: the median of the loads the profiles or predictors measured, one "
        "per process; none measured: on a GPU this project's GPU measurements (said as a guess), on a CPU 0)",
    )
    p.add_argument(
        "--extrapolate",
        action="store_true",
        help="let predictors go past 2x the largest batch measured "
        "(up to their max_batch), where their error was never measured",
    )
    p.add_argument(
        "--transfer",
        action="store_true",
        help="plan pool types nobody profiled (GPUs of the specification table) on the other GPUs' measured "
        "curves carried through the GPU specifications (perfmodel fit --target-hardware); the deadline "
        "probability counts the transfer's error",
    )
    p.add_argument(
        "--confidence",
        type=typed(_confidence),
        metavar="P",
        help="the probability that every image is done by the deadline, from 0.5 (the median plan) to 0.999, "
        "or 'none' for a fixed rule (--margin, --use) (default: 0.95, or none when --margin or --use p99 "
        "is given)",
    )
    p.add_argument(
        "--decode-time",
        type=typed(arguments.seconds, "decode", allow_zero=True),
        metavar="T",
        help="time to decode one image, added to every batch (batch x T), "
        "for workers whose image decoding shares their CPU cores, e.g. 2ms (`perfmodel run` measures it: "
        "decode_s_per_image)",
    )
    p.add_argument(
        "--max-batches", type=typed(_max_batches), metavar="N", help="at most N batches per GPU, the first included"
    )
    p.add_argument(
        "--gap",
        type=typed(arguments.below_one, "gap", example="1e-4"),
        metavar="REL",
        help="relative optimality gap the solver may stop at (default: 0, or 1e-4 for cost)",
    )
    p.add_argument(
        "--time-limit",
        type=typed(arguments.seconds, "time_limit"),
        default=10.0,
        metavar="T",
        help="solver time limit (default: 10s)",
    )
    p.add_argument("--json", action="store_true", help="print the plan (or why there is none) as JSON")
    _add_online(p)
    p.set_defaults(run=run)


def _add_online(p) -> None:
    g = p.add_argument_group("--mode online", "Plan for requests arriving at a rate, answered within an SLO.")
    g.add_argument(
        "--rate",
        type=_online("rate"),
        metavar="R",
        help="requests per second: 400/s, 20k/s, 24000/min (default with --arrivals: the trace's)",
    )
    g.add_argument("--slo", type=_online("slo"), metavar="T", help="latency objective per request, e.g. 100ms")
    g.add_argument(
        "--percentile",
        type=_online("percentile"),
        metavar="P",
        help="share of requests that must meet the SLO, in percent (default: 99)",
    )
    g.add_argument(
        "--request-size",
        type=_online("request_size"),
        metavar="K",
        help="images per request (default: 1)",
    )
    g.add_argument(
        "--arrivals", metavar="FILE", help="a CSV of arrival times (column arrival_s, seconds) to plan and check with"
    )
    g.add_argument(
        "--triton-config",
        metavar="DIR",
        help="write the config.pbtxt settings the plan assumes into this model directory",
    )
    g.add_argument(
        "--ray-serve-config",
        metavar="FILE",
        help="write the Ray Serve deployment settings the plan means (replicas, max_ongoing_requests, "
        "@serve.batch's max_batch_size and batch_wait_timeout_s) to this JSON file",
    )
    g.add_argument(
        "--max-queue-delay",
        type=_online("max_queue_delays"),
        metavar="LIST",
        help="max_queue_delay candidates, e.g. 0,0.5ms,2ms (default: 0 and 1/4, 1/2, 1 x one request's time)",
    )
    g.add_argument(
        "--no-simulation",
        action="store_true",
        help="skip the simulation that checks the plan (faster; analytic figures only)",
    )


# Flag types that need the planners' limits (imported when such a flag is given: they load the solvers).


def _images(text: str) -> int:
    from perfmodel.planning.batch_request import MAX_IMAGES

    return arguments.count(text, "images", MAX_IMAGES)


def _pool(text: str) -> dict[str, int]:
    from perfmodel.planning.batch_request import MAX_GPUS

    return parse_pool(text, maximum=MAX_GPUS)


def _max_batches(text: str) -> int:
    from perfmodel.planning.batch_request import MAX_IMAGES

    return arguments.count(text, "max_batches", MAX_IMAGES, 1, "batches")


def _confidence(text: str) -> float | str:
    from perfmodel.planning.batch_request import confidence

    return confidence(text, "confidence")


def _online(name: str):
    """The flag's type: the check of make_online_plan's parameter `name` (planning/online_request.CHECKS)."""

    def read(text: str):
        from perfmodel.planning.online_request import CHECKS

        return CHECKS[name](text, name)

    return typed(read)


def wrong_mode_flags(args) -> list[str]:
    """The flags given that belong to the other kind of plan (at any value: `--use p50` is typed too)."""
    other = BATCH_ONLY if args.mode == "online" else ONLINE_ONLY
    return [
        f"--{name.replace('_', '-')}"
        for name, default in other.items()
        if given(args, name) or getattr(args, name, default) != default
    ]


def run(args) -> int:
    """Flags of the other kind of plan are refused; online plans go to plan_online, batch plans to plan_batch."""
    from perfmodel.errors import InputError

    wrong = wrong_mode_flags(args)
    if wrong:
        raise InputError(
            f"{', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not for --mode {args.mode}; leave "
            f"{'it' if len(wrong) == 1 else 'them'} out{'' if args.mode == 'online' else ', or add --mode online'}."
        )
    if args.mode == "online":
        return plan_online.run(args)
    if args.deadline is None:
        raise InputError(f"--mode {args.mode} needs --deadline, e.g. --deadline 60s.")
    return plan_batch.run(args)
