"""The allow-list behind ``compare --changed-only``: a kernel's Python is closed (only its stated
imports reach other files) only where every name it uses from outside is known to be safe;
each loader that takes a name as data opens it, and the repository's honest kernels stay closed."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from kbench_ci.suite.closed_python import ALLOWED, OpenReach, allowed
from tests.support.suite_repo import kernel_source, ref_source

ROOT = Path(__file__).resolve().parents[3]


def first_open_use(folder: Path, files: dict[str, str], source: str = "k.py") -> str | None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return OpenReach((folder,), folder).first(folder / source)


@pytest.mark.parametrize(("source", "found"), [
    # loaders that take what they load as data
    ("import pickle\nhelper = pickle.loads(b'ckernels.helpers\\nfactor\\n.')\n", "2 (pickle.loads)"),
    ("from pickle import loads as thaw\nhelper = thaw(b'')\n", "2 (pickle.loads)"),
    ("import marshal\nimport types\nf = types.FunctionType(marshal.loads(b''), {})\n", "3 (types.FunctionType)"),
    ("import torch\nobj = torch.load('w.pt', weights_only=False)\n", "2 (torch.load)"),
    ("import torch\nobj = torch.serialization.load('w.pt')\n", "2 (torch.serialization.load)"),
    ("import torch\nm = torch.hub.load('kernels', 'fast', source='local')\n", "2 (torch.hub.load)"),
    ("import torch\ntorch.ops.load_library('libfast.so')\n", "2 (torch.ops.load_library)"),
    ("import numpy as np\ntable = np.load('t.npy')\n", "2 (numpy.load)"),
    ("from torch.utils import cpp_extension\nm = cpp_extension.load('m', ['m.cu'])\n", "2 (torch.utils.cpp_extension.load)"),
    # the interpreter's importers, by any road
    ("helpers = __import__('kernels.' + 'helpers')\n", "1 (__import__)"),
    ("import importlib\nhelpers = importlib.import_module('kernels.helpers')\n", "2 (importlib.import_module)"),
    ("import importlib.resources\ntext = importlib.resources.files('kernels').read_text()\n",
     "2 (importlib.resources.files)"),
    ("import runpy\nrunpy.run_module('kernels.helpers')\n", "2 (runpy.run_module)"),
    ("imp = getattr(print.__self__, '__imp' + 'ort__')\n", "1 (getattr() with a computed name)"),
    ("imp = getattr(print.__self__, '__import__')\n", "1 (getattr(..., '__import__'))"),
    ("import operator\nimp = operator.attrgetter('__self__.__import__')(print)\n", "2 (operator.attrgetter)"),
    ("import ctypes\nload = ctypes.pythonapi.PyImport_ImportModule\n", "2 (ctypes.pythonapi.PyImport_ImportModule)"),
    ("import torch.nn.functional as F\nh = F.importlib.import_module('kernels.helpers')\n",
     "2 (torch.nn.functional.importlib.import_module)"),
    ("import sys as s\nhelpers = s.modules['kernels.helpers']\n", "2 (sys.modules)"),
    ("import sys\nsys.path.insert(0, '/elsewhere')\n", "2 (sys.path.insert)"),
    ("loaders = ().__class__.__base__.__subclasses__()\n", "1 (.__subclasses__)"),
    ("load = globals()['__builtins__']['__import__']\n", "1 (globals)"),
    ("__builtins__ = __builtins__\nimp = __builtins__.__import__\n", "1 (__builtins__)"),
    ("def run(exec):\n    return exec('1')\n", "2 (exec)"),
    ("def f():\n    exec(open('impl.py').read())\n", "2 (exec)"),
    # files found at run time
    ("from pathlib import Path\nsrc = Path(__file__).with_name('k.cu').read_text()\n", "2 (pathlib.Path)"),
    ("import os\nnames = os.listdir('.')\n", "2 (os.listdir)"),
    ("import io\ntext = io.open('t').read()\n", "2 (io.open)"),
    ("import subprocess\nsubprocess.run(['make'])\n", "2 (subprocess.run)"),
    ("x = __file__\n", "1 (__file__)"),
    # names whose meaning the file does not state
    ("import torch\nlib = torch\n", "2 (torch)"),
    ("from math import *\nx = sqrt(2.0)\n", "1 (from math import *)"),
    ("x = undefined_helper(2)\n", "1 (undefined_helper, bound nowhere in the file)"),
])
def test_each_use_not_known_safe_opens_the_file_and_is_named_with_its_line(
    tmp_path: Path, source: str, found: str
) -> None:
    assert first_open_use(tmp_path, {"k.py": source}) == found


@pytest.mark.parametrize("source", [
    "import triton.language as tl\ndef k(p):\n    return tl.load(p)\n",
    "import torch\nfn = torch.compile(lambda x: x * 2)\n",
    "import torch\nsize = torch.float16.itemsize + torch.randn(3).float().sum().item()\n",
    "import torch.nn.functional as F\ndef f(x):\n    return F.layer_norm(x, (x.shape[-1],))\n",
    "def reference(input, output, **_):\n    output.copy_(input)\n",  # `input` read as a parameter
    "import math\nfrom dataclasses import dataclass\n@dataclass(frozen=True)\nclass C:\n    n: int = math.ceil(2.5)\n",
    "if __name__ == '__main__':\n    print(len(range(3)))\n",
    "def f(x):\n    try:\n        return x.shape\n    except AttributeError as error:\n        raise ValueError(str(error)) from None\n",
])
def test_the_common_torch_triton_and_python_api_keeps_a_file_closed(tmp_path: Path, source: str) -> None:
    assert first_open_use(tmp_path, {"k.py": source}) is None


@pytest.mark.parametrize("path", sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").rglob("*.py")))
def test_the_examples_are_closed(path: str) -> None:
    source = ROOT / path
    assert OpenReach((source.parent, ROOT), ROOT).first(source) is None


@pytest.mark.parametrize(("kind", "variant"), [("triton", "ok"), ("pytorch", "ok"), ("triton", "wrong"), ("pytorch", "raises")])
def test_the_test_suites_kernels_are_closed(tmp_path: Path, kind: str, variant: str) -> None:
    assert first_open_use(tmp_path, {"k.py": kernel_source(kind, variant), "k_ref.py": ref_source(kind)}) is None
    assert OpenReach((tmp_path,), tmp_path).first(tmp_path / "k_ref.py") is None


@pytest.mark.parametrize(("kernel", "found"), [
    ("from helpers import factor\nx = factor()\n", None),  # the repository's code: checked in its own file
    ("import helpers\nx = helpers.factor()\n", None),
    ("from helpers import pickle\nf = pickle.loads(b'')\n", "2 (pickle.loads)"),
    ("import helpers\nf = helpers.torch.load('w.pt')\n", "2 (torch.load)"),
    ("from helpers import thaw\nf = thaw(b'')\n", "2 (pickle.loads)"),
    ("from pkg import helpers\nf = helpers.thaw(b'')\n", "2 (pickle.loads)"),
    ("import pkg.helpers\nf = pkg.helpers.thaw(b'')\n", "2 (pickle.loads)"),
    ("import helpers\nmodule = helpers\n", "2 (helpers (a repository module) as a value)"),
])
def test_a_name_a_repository_module_imports_is_followed_to_what_it_is(
    tmp_path: Path, kernel: str, found: str | None
) -> None:
    helpers = "import pickle\nimport torch\nfrom pickle import loads as thaw\n\ndef factor():\n    return 2.0\n"
    files = {"k.py": kernel, "helpers.py": helpers, "pkg/__init__.py": "", "pkg/helpers.py": helpers}
    assert first_open_use(tmp_path, files) == found


def test_a_repository_package_named_like_an_installed_module_is_not_taken_for_it(tmp_path: Path) -> None:
    # The worker has imported pickle long before the kernel: `pickle` is the standard library's.
    files = {"k.py": "import pickle\nf = pickle.loads(b'')\n", "pickle/__init__.py": "", "pickle/loads.py": ""}
    assert first_open_use(tmp_path, files) == "2 (pickle.loads)"


def test_no_allowed_entry_is_a_module_so_nothing_past_one_is_another_modules_namespace() -> None:
    # torch.nn.functional.importlib is a module: a `torch.nn.functional.*` entry would let
    # `F.importlib.import_module(...)` through.
    for entry in sorted(ALLOWED):
        module_name, _, name = entry.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue  # cutlass, flashinfer, numpy where not installed
        if name == "*":
            modules = [n for n, value in vars(module).items() if not n.startswith("_") and inspect.ismodule(value)]
            assert modules == [], entry
        else:
            assert not inspect.ismodule(getattr(module, name, None)), entry
    assert allowed("torch.randn") and allowed("torch.float16.itemsize") and allowed("math.sqrt")
    assert not allowed("torch") and not allowed("torch.load") and not allowed("math")
    assert not allowed("torch.nn.functional.importlib.import_module")
