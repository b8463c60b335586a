#!/usr/bin/env python3
"""Fails when an #include goes up the layer order (docs/ARCHITECTURE.md, "Layers").

Every folder under src/ is one layer, ranked bottom up below. A file may include headers of its
own folder and of lower ranks, and the public headers (cltensor/...); never a folder of a higher
rank, nor another folder of the same rank (the op families are independent of each other, and so
are io and interop). A file listed in FILES is a layer of its own, ranked apart from its folder:
fusion/hooks.h, what the layers below the fusion graph call of it, sits just above core while
the rest of src/fusion/ sits above the op families it fuses. Under tools/, only tools/common/
(the tools' internal library) may include src/ headers; the tools themselves use the public API
and tools/common/.

Usage: check_layers.py SOURCE_ROOT      check the tree, list each violation, exit 1 if any
       check_layers.py --self-test      check the checker on made-up trees
"""
import os
import re
import sys
import tempfile

# Bottom up. Same rank: peers that must not include each other.
RANKS = [
    ['core'],
    ['fusion/hooks.h'],  # the fusion graph's hook table: every layer that enqueues calls it
    ['device'],
    ['kernel'],
    ['profile'],    # above the engine (which reaches it through a launch observer), below the
                    # tensors and ops that record transfers and GEMMs through it
    ['memory'],
    ['tensor'],
    ['elementwise', 'reduce', 'random', 'linalg', 'shape', 'index'],
    ['fusion'],     # the fusion graph: records elementwise ops, casts, full reductions and softmax
    ['nn', 'io', 'interop'],  # nn: composite ops over the op families
    ['autograd'],   # backward formulas over every op family (recording is tensor/graph.h)
    ['optim', 'data'],  # optimizers, schedulers, gradient scaling, checkpoints: over autograd
                        # and io; data: the data loader, over random, index and the tensors
    ['dist', 'module'],  # dist: process groups, collectives, DDP (its gradient hook is in
                         # tensor/graph.h); module: modules over nn, autograd and io (state dicts)
]
RANK = {layer: r for r, layers in enumerate(RANKS) for layer in layers}
# Files ranked apart from their folder (their path under src/ names their layer in RANKS).
FILES = {layer for layer in RANK if '/' in layer}


def layer_of(path):
    """The layer of a path under src/ ('fusion/hooks.h'), or None for one outside every folder."""
    if path in FILES:
        return path
    return path.split('/')[0] if '/' in path else None

# Known exceptions, each (including file, included header) with why it is still there. Keep this
# empty where possible: an entry is a debt, not a rule.
ALLOWED = {
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    # Comments may mention includes (as examples); drop them first.
    text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    for m in INCLUDE.finditer(text):
        yield text.count('\n', 0, m.start()) + 1, m.group(1)


def sources(root, top):
    base = os.path.join(root, top)
    for dirpath, dirs, files in os.walk(base):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(('.c', '.h')):
                full = os.path.join(dirpath, name)
                yield full, os.path.relpath(full, root).replace(os.sep, '/')


def check(root):
    problems = []
    for full, rel in sources(root, 'src'):
        parts = rel.split('/')
        if len(parts) < 3:
            continue
        layer = layer_of('/'.join(parts[1:]))
        if layer not in RANK:
            problems.append(f'{rel}: folder src/{layer}/ has no place in the layer order (scripts/check_layers.py)')
            continue
        for line, inc in includes(full):
            target = layer_of(inc)
            if target is None or target == 'cltensor' or target == layer or target not in RANK:
                continue
            if (rel, inc) in ALLOWED:
                continue
            if RANK[target] > RANK[layer]:
                problems.append(f'{rel}:{line}: includes "{inc}": {target} is above {layer} in the layer order')
            elif RANK[target] == RANK[layer]:
                problems.append(f'{rel}:{line}: includes "{inc}": {target} and {layer} are peers and must not '
                                'include each other')
    for full, rel in sources(root, 'tools'):
        if rel.startswith('tools/common/'):
            continue
        for line, inc in includes(full):
            target = layer_of(inc)
            if target in RANK and (rel, inc) not in ALLOWED:
                problems.append(f'{rel}:{line}: includes the private header "{inc}": tools use the public API '
                                'and tools/common/')
    return problems


def self_test():
    def tree(files):
        d = tempfile.mkdtemp(prefix='ct-layers-')
        for rel, text in files.items():
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, 'w') as f:
                f.write(text)
        return d

    ok = tree({
        'src/kernel/engine.c': '#include "core/error.h"\n#include "kernel/engine.h"\n#include "cltensor/version.h"\n',
        'src/tensor/copy.c': '/* #include "io/io.h" in a comment */\n#include "profile/profile.h"\n',
        'tools/common/x.c': '#include "linalg/linalg.h"\n',
        'tools/tune/t.c': '#include "cltensor/cltensor.h"\n#include "common/x.h"\n',
        'src/device/device.c': '#include "fusion/hooks.h"\n',
        'src/fusion/graph.c': '#include "fusion/hooks.h"\n#include "fusion/fusion.h"\n#include "reduce/reduce.h"\n',
        'src/fusion/hooks.h': '#include "cltensor/tensor.h"\n',
    })
    bad = tree({
        'src/kernel/engine.c': '#include "core/error.h"\n#include "profile/profile.h"\n',
        'src/random/random.c': '#include "reduce/reduce.h"\n',
        'src/interop/dlpack.c': '  #  include "io/io.h"\n',
        'src/device/device.h': '#include "tensor/tensor.h"\n',
        'src/newthing/x.c': '\n',
        'tools/tune/t.c': '#include "device/device.h"\n',
        'src/fusion/hooks.h': '#include "fusion/fusion.h"\n',
        'src/reduce/reduce.c': '#include "fusion/fusion.h"\n#include "fusion/hooks.h"\n',
    })
    fails = 0
    got = check(ok)
    if got:
        print('self-test: a clean tree was refused:', *got, sep='\n  ')
        fails += 1
    got = check(bad)
    want = ['src/device/device.h:1', 'src/fusion/hooks.h:1', 'src/interop/dlpack.c:1', 'src/kernel/engine.c:2',
            'src/newthing/x.c', 'src/random/random.c:1', 'src/reduce/reduce.c:1', 'tools/tune/t.c:1']
    for w in want:
        if not any(p.startswith(w) for p in got):
            print(f'self-test: {w} was not reported; got:', *got, sep='\n  ')
            fails += 1
    if len(got) != len(want):
        print(f'self-test: {len(got)} problems reported, {len(want)} expected:', *got, sep='\n  ')
        fails += 1
    print('self-test:', 'failed' if fails else 'ok')
    return 1 if fails else 0


def main(argv):
    if len(argv) == 2 and argv[1] == '--self-test':
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(argv[1])
    for p in problems:
        print(p)
    if problems:
        print(f'{len(problems)} include(s) against the layer order (docs/ARCHITECTURE.md, "Layers")')
        return 1
    print('layer order ok')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
