"""perfmodel plan: how many GPUs, and which batch sizes, meet a deadline (or how much fits in one)."""

from __future__ import annotations

from perfmodel import console, exit_codes
from perfmodel.commands import plan_online
from perfmodel.commands.common import formatter, typed
from perfmodel.planning import arguments
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
  perfmodel plan --mix 224=70000,512=30000 --deadline 2m --pool h100=8,a100=16 --margin 5% --use p99
  perfmodel plan --images 1M --deadline 10m --objective cost --price h100=4.5,a100=2.2
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
measurements: its CPU, for CPU pools, and one H200, h200) and profiles/reference/*.csv (published GPU
measurements: a100, a100-80gb, a30, a10, v100, v100-32gb, t4). The plan says per hardware type where its
numbers come from; published figures have no warm-up, so their first batch is timed as a steady one
(warmup_measured: false in --json), and on a GPU a load and a first call are added, from this project's
own GPU measurements and said to be a guess: the plan states the fixed costs' share of the deadline.
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "plan",
        help="choose how many GPUs and which batch sizes meet a deadline",
        description="Choose how many GPUs of which type, and which mini-batch size on each, finish the images by "
        "the deadline (soft real-time), or finish as many as possible (relaxed). The answer is proven "
        "optimal by an integer program (Pyomo + HiGHS).",
        epilog=PLAN_EXAMPLES + "\n" + plan_online.ONLINE_EXAMPLES + "\n" + exit_codes.help_text("plan"),
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
    plan_online.add_arguments(p)
    p.set_defaults(run=run_mode)


def run_mode(args) -> int:
    """Flags of the other kind of plan are refused; online plans go to plan_online, batch plans to run()."""
    from perfmodel.errors import InputError

    wrong = plan_online.wrong_mode_flags(args)
    if wrong:
        raise InputError(
            f"{', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not for --mode {args.mode}; leave "
            f"{'it' if len(wrong) == 1 else 'them'} out{'' if args.mode == 'online' else ', or add --mode online'}."
        )
    if args.mode == "online":
        return plan_online.run_online(args)
    if args.deadline is None:
        raise InputError(f"--mode {args.mode} needs --deadline, e.g. --deadline 60s.")
    return run(args)


def _images(text: str) -> int:
    from perfmodel.planning.batch_request import MAX_IMAGES

    return arguments.count(text, "images", MAX_IMAGES)


def _pool(text: str) -> dict[str, int]:
    from perfmodel.planning.batch_request import MAX_GPUS

    return parse_pool(text, maximum=MAX_GPUS)


def _max_batches(text: str) -> int:
    from perfmodel.planning.batch_request import MAX_IMAGES

    return arguments.whole(text, "max_batches", MAX_IMAGES, "batches, the first included")


def _confidence(text: str) -> float | str:
    from perfmodel.planning.batch_request import confidence

    return confidence(text, "confidence")


def run(args) -> int:
    from perfmodel.planning.batch import MAX_IMAGES, NoPlanError, make_plan
    from perfmodel.planning.batch_text import PLAN_COLUMNS, plan_text
    from perfmodel.planning.context import PLAN_FORMAT, PLAN_SCHEMA_VERSION
    from perfmodel.readers import given
    from perfmodel.units import parse_mix

    mix = None if args.mix is None else parse_mix(args.mix, args.images, maximum=MAX_IMAGES)  # shares of --images
    try:
        job = make_plan(
            images=args.images,
            deadline=args.deadline,
            input_size=args.input_size,
            mix=mix,
            pool=args.pool,
            profiles=args.profile,
            predictors=args.predictor,
            model=args.model,
            mode=args.mode,
            objective=args.objective,
            margin=args.margin if given(args, "margin") or args.margin != 0 else None,  # --margin 0 typed: fixed rule
            use=args.use,
            load_time=args.load_time,
            decode=args.decode_time,
            max_batches=args.max_batches,
            prices=args.price,
            backend=args.backend,
            precision=args.precision,
            gap=args.gap,
            time_limit=args.time_limit,
            extrapolate=args.extrapolate,
            confidence=args.confidence,
            transfer=args.transfer,
        )
    except NoPlanError as exc:
        if args.json:
            head = {"format": PLAN_FORMAT, "schema_version": PLAN_SCHEMA_VERSION}
            console.print_json(console.clean_for_json({**head, **exc.diagnosis.to_dict()}))
        raise
    if not args.json:
        said = plan_text(job)
        for line in said.lines:
            console.out.print(line, markup=False)
        if said.rows:
            console.table(None, PLAN_COLUMNS, said.rows)
        for line in said.notes:
            console.note(line)
        return 0
    console.print_json(console.clean_for_json(job.to_dict()))
    return 0
