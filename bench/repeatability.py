#!/usr/bin/env python3
"""Do two `fuselm bench --json` results of the same command agree?

Prints every decode tokens/s figure both results hold (latency, each throughput batch, each depth,
each stability configuration) with their difference, and exits 1 when the latency scenario's
decode tokens/s differ by more than --tolerance (3% by default: the protocol's repeatability
bound). Differences are relative to the first result.

Usage: bench/repeatability.py FIRST.json SECOND.json [--tolerance 0.03]
"""
import argparse
import json
import sys


def decode_rates(result):
    """(label, decode tokens/s) pairs of every configuration a result holds."""
    s = result.get("scenarios", {})
    rates = []
    if "latency" in s:
        rates.append(("latency decode tok/s", s["latency"]["decode_tok_s"]))
    for t in s.get("throughput", []):
        rates.append((f'throughput batch {t["batch"]} decode tok/s', t["decode_tok_s"]))
    for d in s.get("depth", []):
        rates.append((f'depth {d["depth"]} decode tok/s', d["decode_tok_s"]))
    if "stability" in s:
        rates.append(("stability batch 1 decode tok/s", s["stability"]["itl"]["decode_tok_s"]))
        for b in s["stability"]["steps"]:
            rates.append((f'stability batch {b["batch"]} decode tok/s', b["decode_tok_s"]))
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--tolerance", type=float, default=0.03, help="largest relative latency difference")
    args = parser.parse_args()
    with open(args.first) as f:
        a = json.load(f)
    with open(args.second) as f:
        b = json.load(f)
    for key in ("model", "options", "device", "dtype", "path"):
        if a.get(key) != b.get(key):
            print(f"note: the two results differ in '{key}'", file=sys.stderr)

    second = dict(decode_rates(b))
    latency_diff = None
    print(f'{"figure":40} {"first":>12} {"second":>12} {"diff":>8}')
    for label, x in decode_rates(a):
        if label not in second:
            continue
        y = second[label]
        diff = (y - x) / x
        if label.startswith("latency"):
            latency_diff = diff
        print(f"{label:40} {x:12.1f} {y:12.1f} {100 * diff:+7.2f}%")
    if latency_diff is None:
        sys.exit("repeatability.py: both results need the latency scenario")
    ok = abs(latency_diff) <= args.tolerance
    print(f"latency decode tok/s {'agree' if ok else 'DIFFER'}: {100 * abs(latency_diff):.2f}% "
          f"(tolerance {100 * args.tolerance:.1f}%)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
