#!/usr/bin/env python3
"""Generates kernels/pocl_builtins.h: the declarations of Clang's opencl-c.h that the library's
kernels call, and only those (docs/PERFORMANCE.md, "First run").

Why: PoCL 3.1 compiles every program with Clang's opencl-c.h forced in front of it: 895 KB,
14,500 declarations, about 78 ms of parsing per clBuildProgram on the 2-core build machine, where
a whole one-kernel program builds in 12 ms without it. A training step's first run builds 20-odd
programs. The kernel engine (src/kernel/engine.c) therefore builds the library's own programs on
PoCL with -D_OPENCL_H_ (opencl-c.h's include guard, so its body is skipped) and this file in
front of common.cl; a build that fails that way is built again with the full header.

What is kept: every declaration (all overloads) of each builtin whose name appears as an
identifier in kernels/ (this file excepted) or in src/fusion/ (the generated kernels' text), and
every preprocessor line around them, so that a kept declaration is under the same #if as in
opencl-c.h; the header's #define, #pragma and #undef lines are all kept. Overload resolution
therefore sees, for each name a kernel uses, exactly the candidates the full header declares:
the light header changes which names are declared, never what a call resolves to. A name pasted
together by the preprocessor (CT_CAT(convert_, T)) is not seen by the scan; its build fails
with an undeclared function and falls back to the full header, which the kernel engine counts
(tests/kernel/test_light_header.c builds every kernels/ program and requires no fallback).

Usage:
  pocl_builtins.py [--header PATH] [--out PATH]   write kernels/pocl_builtins.h
  pocl_builtins.py --check [--header PATH]        exit 1 if the committed file is not what this
                                                  script writes now, 77 (skipped) without the
                                                  header (PoCL not installed)
The header defaults to PoCL's copy, /usr/share/pocl/include/opencl-c.h.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, 'kernels', 'pocl_builtins.h')
DEFAULT_HEADER = '/usr/share/pocl/include/opencl-c.h'
IDENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


def strip_comments(text):
    """Comments out, newlines kept (a comment never holds a declaration)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * text.count('\n', i, j))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return ''.join(out)


def used_names(root):
    """Every identifier of the kernel sources and of the code that writes kernels."""
    paths = sorted(glob.glob(os.path.join(root, 'kernels', '*.cl')) +
                   glob.glob(os.path.join(root, 'kernels', '*.h')) +
                   glob.glob(os.path.join(root, 'src', 'fusion', '*.c')))
    names = set()
    for p in paths:
        if os.path.basename(p) == 'pocl_builtins.h':
            continue
        with open(p, encoding='utf-8') as f:
            names.update(IDENT.findall(f.read()))
    return names


def function_name(decl):
    """The declared function's name: the identifier before the parameter list's '('."""
    d = re.sub(r'__attribute__\s*\(\(.*?\)\)', ' ', decl)
    m = re.search(r'([A-Za-z_][A-Za-z0-9_]*)\s*\(', d)
    return m.group(1) if m else None


def parse(text):
    """opencl-c.h as a tree: a list of items, each ('pp', line), ('decl', text, name) or
    ('if', [opening line, ...], [items...]) where the lines are #if/#elif/#else and the
    items of each branch follow in order; #endif closes the block."""
    lines = strip_comments(text).split('\n')
    root, stack, pending = [], [], []
    cur = root
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        s = line.strip()
        if s.startswith('#'):
            while line.rstrip().endswith('\\') and i < len(lines):
                line = line.rstrip()[:-1] + ' ' + lines[i].strip()
                i += 1
            s = ' '.join(line.strip().split())
            word = re.match(r'#\s*(\w+)', s).group(1)
            if word in ('if', 'ifdef', 'ifndef'):
                block = ['if', [(s, [])]]
                cur.append(block)
                stack.append(cur)
                cur = block[1][-1][1]
            elif word in ('elif', 'else'):
                block = stack[-1][-1]
                block[1].append((s, []))
                cur = block[1][-1][1]
            elif word == 'endif':
                cur = stack.pop()
            else:
                cur.append(('pp', s))
            continue
        if not s:
            continue
        pending.append(s)
        if s.endswith(';'):
            decl = ' '.join(' '.join(pending).split())
            pending = []
            cur.append(('decl', decl, function_name(decl)))
    if stack or pending:
        sys.exit('pocl_builtins.py: unbalanced #if or a declaration without ";" in the header')
    return root


def emit(items, keep, out):
    """Writes the kept items; returns whether anything but #if lines was written."""
    wrote = False
    for it in items:
        if it[0] == 'pp':
            out.append(it[1])
            wrote = True
        elif it[0] == 'decl':
            if it[2] in keep:
                out.append(it[1])
                wrote = True
        else:
            inner = []
            any_branch = False
            for opening, body in it[1]:
                part = []
                if emit(body, keep, part):
                    any_branch = True
                inner.append((opening, part))
            if any_branch:
                for opening, part in inner:
                    out.append(opening)
                    out.extend(part)
                out.append('#endif')
                wrote = True
    return wrote


def generate(header):
    with open(header, encoding='utf-8') as f:
        tree = parse(f.read())
    # The guard opencl-c.h is skipped by: the light header must not reuse it, and
    # opencl-c-base.h is in front of every PoCL program already.
    guard = tree[0] if tree and tree[0][0] == 'if' else None
    if not guard or not guard[1][0][0].startswith('#ifndef _OPENCL_H_'):
        sys.exit(f'pocl_builtins.py: {header} does not start with #ifndef _OPENCL_H_')
    body = [it for it in guard[1][0][1]
            if not (it[0] == 'pp' and (it[1] == '#define _OPENCL_H_' or it[1].startswith('#include')))]
    names = used_names(ROOT)
    declared = set()

    def collect(items):
        for it in items:
            if it[0] == 'decl' and it[2]:
                declared.add(it[2])
            elif it[0] == 'if':
                for _, b in it[1]:
                    collect(b)
    collect(body)
    keep = names & declared
    out = []
    emit(body, keep, out)
    ndecl = sum(1 for line in out if not line.startswith('#'))
    head = [
        '/* Generated by scripts/pocl_builtins.py from Clang\'s opencl-c.h (Apache-2.0 WITH',
        ' * LLVM-exception): do not edit. The declarations of the OpenCL C builtins the library\'s',
        ' * kernels call, all overloads of each, under the header\'s own #if lines; the kernel engine',
        ' * puts this in front of common.cl on PoCL and builds with -D_OPENCL_H_, which skips the full',
        ' * header (scripts/pocl_builtins.py says why). ' +
        f'{len(keep)} names, {ndecl} declarations. */',
        '#ifndef CT_POCL_BUILTINS_H',
        '#define CT_POCL_BUILTINS_H',
    ]
    return '\n'.join(head + out + ['#endif', '']), sorted(keep)


def main(argv):
    header, out, check = DEFAULT_HEADER, OUT, False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == '--check':
            check = True
        elif a in ('--header', '--out') and args:
            v = args.pop(0)
            if a == '--header':
                header = v
            else:
                out = v
        else:
            print(__doc__, file=sys.stderr)
            return 2
    if not os.path.exists(header):
        print(f'pocl_builtins.py: no {header} (PoCL is not installed): nothing to check')
        return 77 if check else 1
    text, names = generate(header)
    if check:
        try:
            with open(out, encoding='utf-8') as f:
                now = f.read()
        except OSError:
            now = ''
        if now != text:
            print(f'pocl_builtins.py: {os.path.relpath(out, ROOT)} is out of date: a kernel now calls a '
                  'builtin it does not declare, or no longer calls one it does; run scripts/pocl_builtins.py')
            return 1
        print(f'pocl_builtins.py: {os.path.relpath(out, ROOT)} is current ({len(names)} builtins)')
        return 0
    with open(out, 'w', encoding='utf-8') as f:
        f.write(text)
    print(f'wrote {out}: {len(names)} builtins: {" ".join(names)}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
