"""Extracts the migration steps of a Markdown guide, so the test runs what users read.

Usage: doc-blocks.py FILE PHASE OUTDIR
Writes every fenced block whose info string is `sh migration PHASE [local=ACTION]`, in document
order, to OUTDIR/NNN.sh, with OUTDIR/NNN.where holding `FILE:LINE` (the line of the opening
fence) and OUTDIR/NNN.local the ACTION when there is one. Fails when the file has no such block,
so a renamed phase cannot make the test pass vacuously.
"""
import os
import re
import sys

path, phase, out = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out, exist_ok=True)
fence = re.compile(r"^(\s*)(```+|~~~+)\s*(.*)$")
lines = open(path, encoding="utf-8").read().split("\n")
n = 0
i = 0
while i < len(lines):
    m = fence.match(lines[i])
    if not m:
        i += 1
        continue
    indent, marker, info = m.group(1), m.group(2), m.group(3).split()
    start = i + 1
    body = []
    i += 1
    while i < len(lines) and not lines[i].strip().startswith(marker):
        body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
        i += 1
    i += 1
    if info[:3] != ["sh", "migration", phase]:
        continue
    local = [w.split("=", 1)[1] for w in info[3:] if w.startswith("local=")]
    n += 1
    base = os.path.join(out, "%03d" % n)
    open(base + ".sh", "w").write("\n".join(body) + "\n")
    open(base + ".where", "w").write("%s:%d\n" % (os.path.relpath(path), start))
    if local:
        open(base + ".local", "w").write(local[0] + "\n")
if n == 0:
    sys.exit("%s has no block tagged `sh migration %s`" % (path, phase))
