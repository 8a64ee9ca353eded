"""Replay or explore schedules: ``python -m tests.simulation --seed N [--trace]`` replays one;
``--from A --count N`` runs a range and prints each failing seed's replay command;
``--mutation NAME`` runs them with one of issue 44's fixes reverted (tests/simulation/
mutations.py); ``--first`` stops at the first failing seed; ``--topology three-dc`` runs them
in the three-cluster world (dc1 -> dc2 and dc1 -> dc3) instead of the default two-dc."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys

from tests.simulation.campaign import run_schedule
from tests.simulation.mutations import MUTATIONS, mutated
from tests.simulation.world import TOPOLOGIES, TWO_DC, Template


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation")
    parser.add_argument("--seed", type=int, help="replay this seed")
    parser.add_argument("--from", dest="start", type=int, default=0)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--trace", action="store_true", help="print the schedule's events")
    parser.add_argument("--mutation", choices=sorted(MUTATIONS), help="a fix reverted")
    parser.add_argument("--first", action="store_true", help="stop at the first failure")
    parser.add_argument(
        "--topology", choices=sorted(TOPOLOGIES), default=TWO_DC.name, help="the world's clusters"
    )
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # drkit's own logs: the trace says what happened
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.count)
    template = Template()
    failed = 0
    reverted = mutated(args.mutation) if args.mutation else contextlib.nullcontext()
    try:
        with reverted:
            for seed in seeds:
                outcome = run_schedule(seed, template, journal=args.trace, topology=args.topology)
                if args.trace:
                    print("\n".join(outcome.trace))
                status = "ok" if outcome.ok else "FAILED"
                print(
                    f"seed {seed}: {status} - {outcome.events} events, {outcome.runs} runs, "
                    f"{outcome.real_s:.2f}s"
                )
                if outcome.known_gaps:
                    print(f"  known gap not-re-pointed met {outcome.known_gaps}x (exempt)")
                for violation in outcome.violations:
                    print(f"  {violation}")
                if outcome.error:
                    print(f"  {outcome.error}")
                if not outcome.ok:
                    failed += 1
                    mutation = f" --mutation {args.mutation}" if args.mutation else ""
                    print(f"  replay: {outcome.replay()}{mutation}")
                    if args.first:
                        break
    finally:
        template.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
