#!/usr/bin/env python3
"""Runs a test program under mpirun and checks every rank's verdict (tests/dist/meson.build).

  run_mpi.py --np N [--tcp] [--recovery] [--dead R]... [--tag T] [--mpich] -- PROGRAM ARGS...

Each rank of PROGRAM prints "T rank R: ok" (T: dist-test unless --tag) when its checks passed. This passes when
every rank but the --dead ones printed it within the time limit and, without --recovery,
mpirun exited 0 (with --enable-recovery, Open MPI's mpirun exits 0 whatever the ranks did, so
the lines are the verdict). --tcp forces the TCP transport (--mca pml ob1 --mca btl tcp,self);
otherwise Open MPI picks shared memory. As root, Open MPI needs OMPI_ALLOW_RUN_AS_ROOT*: set
here. --mpich runs MPICH's mpiexec.mpich instead (a build with -Dmpi_impl=mpich): --tcp sets
UCX_TLS=tcp,self (Debian's MPICH talks through UCX), --recovery passes -disable-auto-cleanup (so
hydra does not kill the survivors when a rank dies). Exit 77 (skip) when the launcher is
missing."""
import os
import re
import shutil
import subprocess
import sys


def main(argv):
    np_, tcp, recovery, dead, tag, mpich = 2, False, False, set(), 'dist-test', False
    i = 0
    while i < len(argv) and argv[i] != '--':
        a = argv[i]
        if a == '--np':
            np_ = int(argv[i + 1])
            i += 1
        elif a == '--tcp':
            tcp = True
        elif a == '--recovery':
            recovery = True
        elif a == '--mpich':
            mpich = True
        elif a == '--tag':
            tag = argv[i + 1]
            i += 1
        elif a == '--dead':
            dead.add(int(argv[i + 1]))
            i += 1
        else:
            print(f'run_mpi.py: unknown option {a}', file=sys.stderr)
            return 2
        i += 1
    prog = argv[i + 1:]
    mpirun = shutil.which('mpiexec.mpich' if mpich else 'mpirun')
    if not mpirun:
        print('1..0 # SKIP', 'mpiexec.mpich' if mpich else 'mpirun', 'not found')
        return 77
    env = dict(os.environ)
    if mpich:
        cmd = [mpirun, '-n', str(np_)]
        if tcp:
            env['UCX_TLS'] = 'tcp,self'
        if recovery:
            cmd += ['-disable-auto-cleanup']
    else:
        cmd = [mpirun, '--oversubscribe', '-np', str(np_)]
        if tcp:
            cmd += ['--mca', 'pml', 'ob1', '--mca', 'btl', 'tcp,self']
        if recovery:
            cmd += ['--enable-recovery']
    cmd += prog
    env.setdefault('OMPI_ALLOW_RUN_AS_ROOT', '1')
    env.setdefault('OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1')
    # PoCL: one device per rank, few threads each (the ranks share the machine's cores).
    env.setdefault('POCL_DEVICES', 'pthread')
    env.setdefault('POCL_MAX_PTHREAD_COUNT', '1')
    # Under the ASan setup the ranks still check every memory access, but not leaks: Open MPI
    # leaks at init and finalize from plugins it has unloaded again, which LeakSanitizer names
    # '<unknown module>' and no suppression can match (docs/RELIABILITY.md).
    if 'detect_leaks=1' in env.get('ASAN_OPTIONS', ''):
        env['ASAN_OPTIONS'] = env['ASAN_OPTIONS'].replace('detect_leaks=1', 'detect_leaks=0')
    print('#', ' '.join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=100)
        out, rc = p.stdout.decode(errors='replace'), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b'').decode(errors='replace'), 'timeout'
    sys.stdout.write(out)
    ok = {int(m) for m in re.findall(r'^' + re.escape(tag) + r' rank (\d+): ok\b', out, re.M)}
    want = set(range(np_)) - dead
    bad = []
    if ok != want:
        bad.append(f'ranks that passed: {sorted(ok)}, expected {sorted(want)}')
    if rc == 'timeout':
        bad.append('mpirun did not finish within 100 s')
    elif not recovery and rc != 0:
        bad.append(f'mpirun exited {rc}')
    for b in bad:
        print('FAIL:', b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
