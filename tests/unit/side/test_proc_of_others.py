"""What a hardened side reads of the judge's /proc entries (docs/isolation.md):
the judge is not dumpable, and the side dropped CAP_SYS_PTRACE. Its memory and what its
descriptors lead to (the lifeline's key) stay closed to every side; its environment, memory map
and the numbers of its descriptors are closed to a side of a user that is not root, and open
to one run as root (the docs say so: run the action as a user that is not root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# the judge's stand-in: not dumpable, a pipe holding a key, and a hardened side under it
JUDGE = r"""
import os, subprocess, sys
from kbench_ci.procgroup import make_non_dumpable
assert make_non_dumpable()
read, write = os.pipe()
os.write(write, b"the case's key")
completed = subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2], str(read)], pass_fds=(read,),
                           capture_output=True, text=True)
sys.stdout.write(completed.stdout)
sys.stderr.write(completed.stderr)
assert os.read(read, 100) == b"the case's key"  # nothing was taken from the pipe
"""
SIDE = r"""
import json, os, sys
from pathlib import Path
from kbench_ci.side.harden import harden
harden([Path(sys.argv[1])])
judge, key = os.getppid(), int(sys.argv[2])
result = {}
def attempt(name, call):
    try:
        call()
        result[name] = "read"
    except OSError as exc:
        result[name] = exc.__class__.__name__
attempt("memory", lambda: open(f"/proc/{judge}/mem", "rb").close())
attempt("descriptor_target", lambda: os.readlink(f"/proc/{judge}/fd/{key}"))
attempt("descriptor_open", lambda: os.close(os.open(f"/proc/{judge}/fd/{key}", os.O_RDONLY | os.O_NONBLOCK)))
attempt("environ", lambda: open(f"/proc/{judge}/environ", "rb").read())
attempt("maps", lambda: open(f"/proc/{judge}/maps", "rb").read())
attempt("descriptor_numbers", lambda: os.listdir(f"/proc/{judge}/fd"))
print(json.dumps(result))
"""


def test_a_side_reads_neither_the_judges_memory_nor_its_descriptors(tmp_path: Path) -> None:
    completed = subprocess.run([sys.executable, "-c", JUDGE, SIDE, str(tmp_path)], capture_output=True, text=True, timeout=60,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    print(result, "uid", os.geteuid())
    closed = ["memory", "descriptor_target", "descriptor_open"]
    if os.geteuid() != 0:
        closed += ["environ", "maps", "descriptor_numbers"]
    assert {name: result[name] for name in closed} == dict.fromkeys(closed, "PermissionError"), result
