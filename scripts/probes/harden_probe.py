"""Which sandbox layer (kbench_ci/side/harden.py) keeps CUDA from starting? Each layer alone, then
Landlock with extra writable folders, each in a fresh process, then torch.cuda.device_count()."""
import subprocess
import sys

CHILD = r'''
import sys, ctypes, os
sys.path.insert(0, os.getcwd())
from pathlib import Path
import kbench_ci.side.harden as h
libc = h._libc()
what = sys.argv[1]
extra = [Path(p) for p in sys.argv[2:]]
if what == "dumpable": libc.prctl(h._PR_SET_DUMPABLE, 0, 0, 0, 0)
elif what == "caps": print(h._drop_ptrace_capability(libc))
elif what == "nnp": libc.prctl(h._PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
elif what == "landlock": libc.prctl(h._PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); print(h._landlock(libc, extra))
elif what == "all": print(h.harden(extra))
import torch
try:
    print(what, "devices", torch.cuda.device_count(), torch.zeros(1, device="cuda").item())
except Exception as e:
    print(what, "FAILED", str(e).splitlines()[0][:200])
'''
variants = [a.split(",") for a in sys.argv[1:]] or [["none"], ["dumpable"], ["caps"], ["nnp"], ["landlock"], ["landlock", "/proc", "/sys"], ["landlock", "/"], ["all"]]
for args in variants:
    r = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=120)
    print(" ".join(args), "->", (r.stdout.strip().replace("\n", " | ") or r.stderr.strip().splitlines()[-1:]))
