#!/usr/bin/env python3
"""Two builds' cltensor-bench in one sitting: a warm-up run of each, then ROUNDS rounds
alternating (before, after, before, ...), each run with --json and the given bench arguments;
prints per figure the medians over the rounds, after/before as a speed (above 1: after is
faster, whatever the unit), and the before runs' own spread (max/min), then the geometric mean.

  bench_compare.py BEFORE_BENCH AFTER_BENCH [--rounds N] [-- BENCH ARGS...]

e.g. bench_compare.py ../old/build/tools/bench/cltensor-bench build/tools/bench/cltensor-bench
     -- --quick --only elementwise,reduce,matmul
Each binary uses the library it was built with (its run path). Used for docs/PERFORMANCE.md's
before/after comparisons; the machine's noise is the spread column."""
import json
import math
import statistics
import subprocess
import sys


def run(bench, args):
    out = subprocess.run([bench, '--json'] + args, capture_output=True, text=True).stdout
    figs = {}
    for line in out.splitlines():
        if line.startswith('{'):
            r = json.loads(line)
            if 'median' in r:
                figs[(r['name'], r.get('shape', ''), r.get('dtype', ''))] = r
    return figs


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    before, after, rest = argv[0], argv[1], argv[2:]
    rounds, args = 3, []
    if '--' in rest:
        args = rest[rest.index('--') + 1:]
        rest = rest[:rest.index('--')]
    if rest[:1] == ['--rounds']:
        rounds = int(rest[1])
    run(before, args), run(after, args)  # warm-up: kernel caches of both versions
    runs = {'before': [], 'after': []}
    for _ in range(rounds):
        runs['before'].append(run(before, args))
        runs['after'].append(run(after, args))
    keys = [k for k in runs['before'][0] if all(k in r for rs in runs.values() for r in rs)]
    speeds = []
    print('%-28s %-24s %10s %10s %6s %7s' % ('figure', 'shape', 'before', 'after', 'speed', 'spread'))
    for k in keys:
        unit = runs['before'][0][k]['unit']
        b = [r[k]['median'] for r in runs['before']]
        a = statistics.median(r[k]['median'] for r in runs['after'])
        bm = statistics.median(b)
        speed = a / bm if unit.endswith('/s') else bm / a
        speeds.append(speed)
        print('%-28s %-24s %10.4g %10.4g %6.2f %7.2f %s' % (k[0][:28], k[1][:24], bm, a, speed,
                                                            max(b) / min(b), unit))
    if speeds:
        print('geometric mean of after/before speed over %d figures: %.3f'
              % (len(speeds), math.exp(sum(map(math.log, speeds)) / len(speeds))))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
