"""`python -m fuzz`: the command line of fuzz.run (see `python -m fuzz --help`)."""

from __future__ import annotations

import argparse
import sys

from .run import Options, main_run
from .target import NotLoopback, loopback_address


def parse(argv: list[str]) -> tuple[Options, str | None]:
    parser = argparse.ArgumentParser(
        prog="python -m fuzz",
        description="Fuzz the platform's JSON-RPC, REST and gRPC bindings (127.0.0.1 only); "
        "exits 1 on any bad answer, 2 when the platform cannot be fuzzed.",
    )
    parser.add_argument("--requests", type=int, default=1000, help="how many (default 1000)")
    parser.add_argument("--web", required=True, help="http://127.0.0.1:PORT of daphne")
    parser.add_argument("--grpc", required=True, help="127.0.0.1:PORT of the gRPC sidecar")
    parser.add_argument("--key", required=True, help="an API key of the agent's tenant")
    parser.add_argument("--agent", required=True, help="<tenant>/<agent> to fuzz")
    parser.add_argument("--seed", type=int, default=0, help="the same seed makes the same cases")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds an answer may take (default 30)"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="requests at a time")
    parser.add_argument(
        "--case", type=int, dest="only_case", help="send only this case of the run (a reproducer)"
    )
    parser.add_argument(
        "--allow-known",
        action="store_true",
        help="do not fail on the known bad answers other work owns (fuzz.judge.KNOWN)",
    )
    parser.add_argument("--report", help="write the bad cases, in full, to this JSON-lines file")
    args = parser.parse_args(argv)
    try:
        loopback_address(args.web, "--web")
        loopback_address(args.grpc, "--grpc")
    except NotLoopback as exc:
        parser.error(str(exc))
    if args.requests < 1 or args.concurrency < 1 or args.timeout <= 0:
        parser.error("--requests, --concurrency and --timeout must be positive")
    if args.only_case is not None and not 0 <= args.only_case < args.requests:
        parser.error("--case must be one of the run's cases: 0 to --requests - 1")
    options = Options(
        requests=args.requests,
        web=args.web.rstrip("/"),
        grpc=args.grpc,
        key=args.key,
        agent=args.agent,
        seed=args.seed,
        timeout=args.timeout,
        concurrency=args.concurrency,
        allow_known=args.allow_known,
        only_case=args.only_case,
    )
    return options, args.report


def main(argv: list[str] | None = None) -> int:
    options, report = parse(sys.argv[1:] if argv is None else argv)
    return main_run(options, report)


if __name__ == "__main__":
    sys.exit(main())
