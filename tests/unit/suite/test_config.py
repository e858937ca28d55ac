"""kbench.toml / [tool.kbench] loading and validation (kbench_ci.suite.loader)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kbench_ci.errors import ConfigError, UsageError
from kbench_ci.suite.loader import find_config, load_suite, parse_threshold
from kbench_ci.suite.model import Case, KernelSpec, Suite
from kbench_ci.suite.settings import SuiteSettings

MINIMAL = """\
[[kernels]]
name = "saxpy"
solution = "kernels/saxpy.py"
ref = "kernels/saxpy_ref.py"
shapes = [{N = 2048}, {N = 4096}]
"""

SECOND = """\
[[kernels]]
name = "gemm"
solution = "kernels/gemm.py"
ref = "kernels/gemm_ref.py"
shapes = [{M = 128, N = 256, K = 64}]
"""

KERNEL_FILES = (
    "kernels/saxpy.py",
    "kernels/saxpy_ref.py",
    "kernels/gemm.py",
    "kernels/gemm_ref.py",
)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Messages show the config path relative to the current directory; from inside tmp_path
    # they start with plain "kbench.toml:", as they do in CI at the repository root.
    monkeypatch.chdir(tmp_path)


def write_suite(root: Path, text: str, name: str = "kbench.toml", files=KERNEL_FILES) -> Path:
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("# kernel\n")
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load_error(root: Path, text: str, **kwargs) -> str:
    path = write_suite(root, text)
    with pytest.raises(ConfigError) as info:
        load_suite(path, **kwargs)
    message = info.value.one_line()
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------------------------
# loading what is valid
# --------------------------------------------------------------------------------------------


def test_minimal_file_loads_with_defaults(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, MINIMAL))

    assert isinstance(suite, Suite)
    assert suite.root == tmp_path.absolute()
    assert suite.source == (tmp_path / "kbench.toml").absolute()
    assert suite.settings == SuiteSettings()
    assert suite.settings.seed == 42
    assert suite.settings.num_warmup == 10
    assert suite.settings.num_trials == 100
    assert suite.settings.discard_first == 1
    assert suite.settings.correctness_trials == 3
    assert suite.settings.timing_method == "cuda_event"
    assert suite.settings.rounds == 10
    assert suite.settings.max_geomean_slowdown is None

    (spec,) = suite.kernels
    assert spec.name == "saxpy"
    assert spec.solution == tmp_path / "kernels/saxpy.py"
    assert spec.ref == tmp_path / "kernels/saxpy_ref.py"
    assert spec.implementation == "auto"
    assert [dict(s) for s in spec.shapes] == [{"N": 2048}, {"N": 4096}]
    assert spec.baselines == ()
    assert spec.atol is None and spec.rtol is None
    assert dict(spec.ptr_sizes) == {}
    assert spec.ptr_size is None
    assert spec.threshold == 0.02
    assert spec.build is None
    assert spec.timeout_s == 600.0


def test_cases_and_case_ids_in_file_order(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, MINIMAL + SECOND))
    assert [c.case_id for c in suite.cases()] == [
        "saxpy[N=2048]",
        "saxpy[N=4096]",
        "gemm[M=128,N=256,K=64]",
    ]
    case = suite.cases()[2]
    assert isinstance(case, Case)
    assert case.kernel is suite.kernels[1]
    assert list(case.dims) == ["M", "N", "K"]


def test_shapes_are_read_only_and_objects_are_frozen_and_hashable(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, MINIMAL))
    spec = suite.kernels[0]
    with pytest.raises(TypeError):
        spec.shapes[0]["N"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.ptr_sizes["x"] = "N"  # type: ignore[index]
    with pytest.raises(AttributeError):
        spec.threshold = 0.5  # type: ignore[misc]
    # Cases can key a dict of results.
    results = {case: case.case_id for case in suite.cases()}
    assert len(results) == 2


def test_defaults_apply_and_kernels_override(tmp_path: Path) -> None:
    text = (
        """\
[defaults]
implementation = "triton"
baselines = ["pytorch-eager"]
atol = 1e-3
rtol = 0
ptr_sizes = { y = "N", z = "N * 2" }
ptr_size = "N"
threshold = "3%"
build = "nvcc -O3 -o {out} {src}"
timeout = 60
seed = 7
num_warmup = 2
num_trials = 20
discard_first = 0
correctness_trials = 5
timing_method = "host_time"
rounds = 4
max_geomean_slowdown = "1%"

"""
        + MINIMAL
        + """\
backend = "cuda-cpp"
baselines = ["torch-compile", "flashinfer"]
atol = 0.5
ptr_sizes = { z = "4", w = 16 }
threshold = 0.1
timeout = 5

"""
        + SECOND
    )
    suite = load_suite(write_suite(tmp_path, text))
    assert suite.settings == SuiteSettings(
        seed=7,
        num_warmup=2,
        num_trials=20,
        discard_first=0,
        correctness_trials=5,
        timing_method="host_time",
        rounds=4,
        max_geomean_slowdown=0.01,
    )
    saxpy, gemm = suite.kernels
    # saxpy overrides
    assert saxpy.implementation == "cuda-cpp"  # through the alias "backend"
    assert saxpy.baselines == ("torch-compile", "flashinfer")
    assert saxpy.atol == 0.5
    assert saxpy.rtol == 0.0
    # ptr_sizes merge entry by entry; an integer becomes its expression
    assert dict(saxpy.ptr_sizes) == {"y": "N", "z": "4", "w": "16"}
    assert saxpy.ptr_size == "N"
    assert saxpy.threshold == pytest.approx(0.1)
    assert saxpy.timeout_s == 5.0
    assert saxpy.build == "nvcc -O3 -o {out} {src}"
    # gemm inherits everything
    assert gemm.implementation == "triton"
    assert gemm.baselines == ("pytorch-eager",)
    assert gemm.atol == 1e-3
    assert dict(gemm.ptr_sizes) == {"y": "N", "z": "N * 2"}
    assert gemm.threshold == pytest.approx(0.03)
    assert gemm.timeout_s == 60.0


def test_shape_tables_of_one_kernel_may_name_different_dims(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "shapes = [{N = 2048}, {N = 4096}]", "shapes = [{N = 2048}, {N = 64, BLOCK = 32}]"
    )
    suite = load_suite(write_suite(tmp_path, text))
    assert [c.case_id for c in suite.cases()] == ["saxpy[N=2048]", "saxpy[N=64,BLOCK=32]"]


def test_build_command_quotes_paths_and_leaves_shell_braces(tmp_path: Path) -> None:
    # (a CUDA C++ kernel: a Python one takes no build command)
    text = MINIMAL + 'implementation = "cuda-cpp"\nbuild = "${NVCC:-nvcc} -I{a,b} -o {out} {src}"\n'
    spec = load_suite(write_suite(tmp_path, text)).kernels[0]
    command = spec.build_command(Path("/src dir/k.cu"), Path("/out/k.so"))
    assert command == "${NVCC:-nvcc} -I{a,b} -o /out/k.so '/src dir/k.cu'"


def test_kernel_spec_freezes_plain_containers() -> None:
    spec = KernelSpec(
        name="k",
        solution="k.py",  # type: ignore[arg-type]
        ref="k_ref.py",  # type: ignore[arg-type]
        implementation="auto",
        shapes=({"N": 1},),
        baselines=["pytorch-eager"],  # type: ignore[arg-type]
        ptr_sizes={"y": "N"},
    )
    assert isinstance(spec.solution, Path)
    assert spec.baselines == ("pytorch-eager",)
    with pytest.raises(TypeError):
        spec.shapes[0]["N"] = 2  # type: ignore[index]
    assert hash(spec) == hash(spec)
    assert Case(spec, {"N": 1}).case_id == "k[N=1]"


def test_check_files_false_loads_without_the_files(tmp_path: Path) -> None:
    path = write_suite(tmp_path, MINIMAL, files=())
    suite = load_suite(path, check_files=False)
    assert suite.kernels[0].solution == tmp_path / "kernels/saxpy.py"
    with pytest.raises(ConfigError, match=r'"solution" file .* does not exist'):
        load_suite(path)


def test_root_override(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    path = write_suite(tmp_path, MINIMAL, files=())
    write_suite(other, "", name="unused.toml")
    for rel in KERNEL_FILES:
        (other / rel).parent.mkdir(parents=True, exist_ok=True)
        (other / rel).write_text("")
    suite = load_suite(path, root=other)
    assert suite.root == other.absolute()
    assert suite.kernels[0].solution == other.absolute() / "kernels/saxpy.py"


# --------------------------------------------------------------------------------------------
# pyproject.toml and finding the file
# --------------------------------------------------------------------------------------------

PYPROJECT = """\
[project]
name = "demo"

[tool.kbench.defaults]
threshold = "5%"

[[tool.kbench.kernels]]
name = "saxpy"
solution = "kernels/saxpy.py"
ref = "kernels/saxpy_ref.py"
shapes = [{N = 2048}]
"""


def test_tool_kbench_in_pyproject(tmp_path: Path) -> None:
    path = write_suite(tmp_path, PYPROJECT, name="pyproject.toml")
    assert find_config(tmp_path) == path
    suite = load_suite(path)
    assert suite.kernels[0].threshold == pytest.approx(0.05)
    assert suite.source == path.absolute()


def test_pyproject_errors_name_the_table(tmp_path: Path) -> None:
    path = write_suite(tmp_path, PYPROJECT + "shape = []\n", name="pyproject.toml")
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert info.value.message == (
        'pyproject.toml [tool.kbench]: kernels[0] ("saxpy"): '
        'unknown key "shape" (did you mean "shapes"?)'
    )


def test_pyproject_without_tool_kbench(tmp_path: Path) -> None:
    path = write_suite(tmp_path, '[project]\nname = "demo"\n', name="pyproject.toml")
    with pytest.raises(ConfigError, match=r"pyproject.toml: has no \[tool.kbench\] table"):
        load_suite(path)
    with pytest.raises(ConfigError) as info:
        find_config(tmp_path)
    assert "no kbench.toml" in info.value.message
    assert "--config" in info.value.hint


def test_kbench_toml_wins_over_pyproject(tmp_path: Path) -> None:
    write_suite(tmp_path, PYPROJECT, name="pyproject.toml")
    path = write_suite(tmp_path, MINIMAL)
    assert find_config(tmp_path) == path


def test_find_config_walks_up_to_the_repository_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    path = write_suite(repo, MINIMAL)
    deep = repo / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) == path.resolve()
    # ... but not past it: a suite above the repository belongs to someone else.
    inner = repo / "a" / "inner"
    (inner / ".git").mkdir(parents=True)
    with pytest.raises(ConfigError, match="no kbench.toml"):
        find_config(inner)


def test_explicit_path(tmp_path: Path) -> None:
    path = write_suite(tmp_path, MINIMAL, name="suites/gpu.toml")
    # an explicit path wins even where a kbench.toml would be found
    write_suite(tmp_path, MINIMAL)
    assert find_config(tmp_path, explicit=path) == path
    suite = load_suite(path, check_files=False)
    assert suite.root == path.parent.absolute()
    with pytest.raises(ConfigError, match="config file missing.toml does not exist"):
        find_config(tmp_path, explicit=Path("missing.toml"))
    with pytest.raises(ConfigError, match="is a directory"):
        find_config(tmp_path, explicit=tmp_path)


# --------------------------------------------------------------------------------------------
# thresholds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("2%", 0.02), ("0.02", 0.02), (0.02, 0.02), (" 2.5 % ", 0.025), ("1e-2", 0.01), (0.5, 0.5)],
)
def test_parse_threshold(value, expected) -> None:
    assert parse_threshold(value) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("abc", "must be a number or a percentage"),
        ("%", "must be a number or a percentage"),
        (True, "got a boolean"),
        (None, "got NoneType"),
        (0, "between 0 and 1"),
        (-0.1, "between 0 and 1"),
        (1, "between 0 and 1"),
        ("100%", "between 0 and 1"),
        ("nan", "between 0 and 1"),
        ("inf", "between 0 and 1"),
    ],
)
def test_parse_threshold_rejects(value, fragment) -> None:
    with pytest.raises(UsageError) as info:
        parse_threshold(value)
    assert info.value.message.startswith("threshold ")
    assert fragment in info.value.message


def test_parse_threshold_suggests_percent() -> None:
    with pytest.raises(UsageError) as info:
        parse_threshold("2")
    assert info.value.hint == 'did you mean "2%"?'


# --------------------------------------------------------------------------------------------
# every error names the file, the kernel and the key
# --------------------------------------------------------------------------------------------

K0 = 'kbench.toml: kernels[0] ("saxpy"): '
DEF = "kbench.toml: [defaults]: "


def with_defaults(body: str) -> str:
    return f"[defaults]\n{body}\n" + MINIMAL


BAD_INPUTS = [
    # --- kernel keys ---
    ("unknown-key", MINIMAL + "shape = []\n", K0 + 'unknown key "shape" (did you mean "shapes"?)'),
    ("unknown-key-no-suggestion", MINIMAL + "zzz = 1\n", K0 + 'unknown key "zzz"'),
    ("missing-ref", MINIMAL.replace('ref = "kernels/saxpy_ref.py"\n', ""),
     K0 + 'missing required key "ref"'),
    ("missing-shapes", MINIMAL.replace("shapes = [{N = 2048}, {N = 4096}]\n", ""),
     K0 + 'missing required key "shapes"'),
    ("missing-name", MINIMAL.replace('name = "saxpy"\n', ""),
     'kbench.toml: kernels[0]: missing required key "name"'),
    ("name-not-string", MINIMAL.replace('name = "saxpy"', "name = 3"),
     'kbench.toml: kernels[0]: "name" must be a string, got an integer (3)'),
    ("name-bad-chars", MINIMAL.replace('name = "saxpy"', 'name = "sax py"'),
     "kbench.toml: kernels[0]: \"name\" 'sax py' may only contain"),
    ("duplicate-name", MINIMAL + "\n" + MINIMAL,
     'kbench.toml: kernels[1] ("saxpy"): duplicate name "saxpy" (already used by kernels[0])'),
    ("second-kernel-indexed", MINIMAL + "\n" + SECOND + "atol = -1\n",
     'kbench.toml: kernels[1] ("gemm"): "atol" must be a finite number >= 0, got -1'),
    ("settings-key-in-kernel", MINIMAL + "seed = 1\n",
     K0 + 'key "seed" is only allowed in [defaults], not in a kernel'),
    ("alias-clash", MINIMAL + 'backend = "triton"\nimplementation = "triton"\n',
     K0 + 'both "implementation" and its alias "backend" are set'),
    # --- shapes ---
    ("shapes-empty", MINIMAL.replace("[{N = 2048}, {N = 4096}]", "[]"),
     K0 + '"shapes" must not be empty'),
    ("shapes-table", MINIMAL.replace("[{N = 2048}, {N = 4096}]", "{N = 2048}"),
     K0 + '"shapes" must be an array of tables, got a single table'),
    ("shapes-not-array", MINIMAL.replace("[{N = 2048}, {N = 4096}]", '"N=2048"'),
     K0 + '"shapes" must be an array of tables'),
    ("shape-not-table", MINIMAL.replace("[{N = 2048}, {N = 4096}]", "[2048]"),
     K0 + "shapes[0] must be a table such as {N = 2048}, got an integer (2048)"),
    ("shape-empty-table", MINIMAL.replace("[{N = 2048}, {N = 4096}]", "[{N = 1}, {}]"),
     K0 + "shapes[1] must name at least one dimension"),
    ("dim-zero", MINIMAL.replace("{N = 4096}", "{N = 0}"),
     K0 + 'shapes[1]: "N" must be a positive integer, got 0'),
    ("dim-negative", MINIMAL.replace("{N = 4096}", "{N = -4}"),
     K0 + 'shapes[1]: "N" must be a positive integer, got -4'),
    ("dim-float", MINIMAL.replace("{N = 4096}", "{N = 4096.0}"),
     K0 + 'shapes[1]: "N" must be a positive integer, got a float (4096.0)'),
    ("dim-bool", MINIMAL.replace("{N = 4096}", "{N = true}"),
     K0 + 'shapes[1]: "N" must be a positive integer, got a boolean (true)'),
    ("dim-name", MINIMAL.replace("{N = 4096}", '{"2N" = 4096}'),
     K0 + 'shapes[1]: dimension name "2N" must be an identifier'),
    ("shape-repeated", MINIMAL.replace("{N = 4096}", "{N = 2048}"),
     K0 + "shapes[1] repeats shapes[0]"),
    # --- shared values ---
    ("implementation-unknown", MINIMAL + 'implementation = "cuda"\n',
     K0 + '"implementation" unknown implementation "cuda" (did you mean "cuda-cpp"?)'),
    ("implementation-type", MINIMAL + "backend = 1\n",
     K0 + '"backend" must be a string, got an integer (1)'),
    ("baseline-unknown", MINIMAL + 'baselines = ["pytorch-eagr"]\n',
     K0 + '"baselines" unknown baseline "pytorch-eagr" (did you mean "pytorch-eager"?)'),
    ("baselines-not-array", MINIMAL + 'baselines = "flashinfer"\n',
     K0 + '"baselines" must be an array'),
    ("baseline-twice", MINIMAL + 'baselines = ["flashinfer", "flashinfer"]\n',
     K0 + '"baselines" lists "flashinfer" twice'),
    ("threshold-not-fraction", MINIMAL + "threshold = 2\n",
     K0 + '"threshold" must be between 0 and 1 (exclusive), such as 0.02 or "2%", got 2 '
     '(did you mean "2%"?)'),
    ("threshold-junk", MINIMAL + 'threshold = "two percent"\n',
     K0 + '"threshold" must be a number or a percentage'),
    ("threshold-percent-too-big", MINIMAL + 'threshold = "150%"\n',
     K0 + '"threshold" must be between 0 and 1'),
    ("atol-string", MINIMAL + 'atol = "1e-3"\n',
     K0 + '"atol" must be a number, got a string (\'1e-3\')'),
    ("rtol-negative", MINIMAL + "rtol = -0.1\n", K0 + '"rtol" must be a finite number >= 0'),
    ("timeout-zero", MINIMAL + "timeout = 0\n",
     K0 + '"timeout" must be a positive number of seconds, got 0'),
    ("ptr-sizes-type", MINIMAL + 'ptr_sizes = ["N"]\n',
     K0 + '"ptr_sizes" must be a table of name = "size expression"'),
    ("ptr-sizes-entry", MINIMAL + "ptr_sizes = { y = [1] }\n",
     K0 + '"ptr_sizes" entry "y" must be a size expression string'),
    ("ptr-size-empty", MINIMAL + 'ptr_size = " "\n', K0 + '"ptr_size" must not be empty'),
    ("build-placeholder", MINIMAL + 'build = "nvcc -o {output} {src}"\n',
     K0 + '"build" has unknown placeholder "{output}"; only {src} and {out} exist'),
    ("build-type", MINIMAL + "build = true\n", K0 + '"build" must be a shell command string'),
    # --- a build on a Python kernel; a timeout the command line refuses too ---
    ("build-on-python", MINIMAL + 'build = "nvcc -o {out} {src}"\n',
     K0 + '"build" compiles a CUDA C++ solution; this kernel is a Python solution, which is not built '
     '(remove "build" from this kernel)'),
    ("timeout-below-a-millisecond", MINIMAL + "timeout = 0.0005\n",
     K0 + '"timeout" must be at least 0.001 seconds, got 0.0005'),
    ("timeout-inf", MINIMAL + "timeout = inf\n", K0 + '"timeout" must be a positive number of seconds, got inf'),
    # --- size expressions are checked when the file loads, not noted at run time ---
    ("bytes-python", MINIMAL + "bytes = \"__import__('os')\"\n",
     'kbench.toml: kernel "saxpy": bytes: size expression \'__import__(\'os\')\' uses a function call, which is not '
     "allowed (use only integers, dimension names, + - * / // % ** and parentheses)"),
    ("flops-unknown-dim", MINIMAL + 'flops = "2 * M * N"\n',
     'kbench.toml: kernel "saxpy": flops: shapes[0]: size expression \'2 * M * N\' uses unknown name \'M\' '
     "(known dims: N)"),
    ("bytes-past-64-bits", MINIMAL.replace("{N = 4096}", "{N = 9223372036854775807}") + 'bytes = "3 * N * 4"\n',
     'kbench.toml: kernel "saxpy": bytes: shapes[1]: size expression \'3 * N * 4\' is too large (beyond 2**63)'),
    # --- paths ---
    ("solution-absolute", MINIMAL.replace('"kernels/saxpy.py"', '"/abs/saxpy.py"'),
     K0 + "\"solution\" must be relative to the config file's directory, got '/abs/saxpy.py'"),
    ("ref-missing-file", MINIMAL.replace('"kernels/saxpy_ref.py"', '"kernels/nope.py"'),
     K0 + "\"ref\" file 'kernels/nope.py' does not exist"),
    ("ref-is-dir", MINIMAL.replace('"kernels/saxpy_ref.py"', '"kernels"'),
     K0 + "\"ref\" 'kernels' is not a file"),
    ("solution-type", MINIMAL.replace('"kernels/saxpy.py"', "1"),
     K0 + '"solution" must be a non-empty path string, got an integer (1)'),
    # --- [defaults] ---
    ("defaults-unknown", with_defaults("sed = 1"),
     DEF + 'unknown key "sed" (did you mean "seed"?)'),
    ("defaults-kernel-key", with_defaults('name = "x"'),
     DEF + 'key "name" is only allowed in a [[kernels]] entry, not in [defaults]'),
    ("defaults-seed-bool", with_defaults("seed = true"),
     DEF + '"seed" must be an integer, got a boolean (true)'),
    ("defaults-trials-zero", with_defaults("num_trials = 0"),
     DEF + '"num_trials" must be >= 1, got 0'),
    ("defaults-discard", with_defaults("num_trials = 3\ndiscard_first = 3"),
     DEF + '"discard_first" (3) must be smaller than "num_trials" (3)'),
    ("defaults-timing-method", with_defaults('timing_method = "cuda-event"'),
     DEF + '"timing_method" unknown timing method "cuda-event" (did you mean "cuda_event"?)'),
    ("defaults-geomean", with_defaults("max_geomean_slowdown = 0"),
     DEF + '"max_geomean_slowdown" must be greater than 0'),
    ("defaults-threshold", with_defaults("threshold = 1.5"),
     DEF + '"threshold" must be between 0 and 1'),
    ("defaults-not-table", "defaults = 3\n" + MINIMAL,
     'kbench.toml: "defaults" must be a table ([defaults]), got an integer (3)'),
    # --- top level ---
    ("top-unknown", 'kernel = "x"\n' + MINIMAL,
     'kbench.toml: unknown top-level key "kernel" (did you mean "kernels"?)'),
    ("top-setting", "threshold = 0.1\n" + MINIMAL,
     'kbench.toml: key "threshold" must be inside [defaults]'),
    ("no-kernels", "[defaults]\nseed = 1\n", "kbench.toml: no kernels"),
    ("kernels-single-table", MINIMAL.replace("[[kernels]]", "[kernels]"),
     'kbench.toml: "kernels" must be an array of tables, got a single table'),
    ("kernels-empty", "kernels = []\n", 'kbench.toml: "kernels" must be a non-empty array'),
    ("kernel-not-table", "kernels = [1]\n",
     "kbench.toml: kernels[0]: must be a table, got an integer (1)"),
]


@pytest.mark.parametrize(("text", "expected"), [b[1:] for b in BAD_INPUTS],
                         ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_names_file_kernel_and_key(tmp_path: Path, text: str, expected: str) -> None:
    message = load_error(tmp_path, text)
    assert message.startswith(expected), message


def test_enough_distinct_bad_inputs() -> None:
    assert len({b[1] for b in BAD_INPUTS}) >= 15


def test_toml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    message = load_error(tmp_path, MINIMAL + "threshold 0.1\n")
    assert message.startswith("kbench.toml: invalid TOML: ")
    assert re.search(r"line 6, column \d+", message), message


def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "kbench.toml").write_bytes(b'[[kernels]]\nname = "\xff"\n')
    with pytest.raises(ConfigError, match="kbench.toml: "):
        load_suite(tmp_path / "kbench.toml")


def test_message_names_absolute_path_outside_cwd(tmp_path: Path, monkeypatch) -> None:
    elsewhere = tmp_path / "tree"
    elsewhere.mkdir()
    path = write_suite(elsewhere, MINIMAL + "shape = 1\n")
    monkeypatch.chdir("/")
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert info.value.message.startswith(f"{path.relative_to('/')}: kernels[0]")


# --------------------------------------------------------------------------------------------
# the documented example stays valid
# --------------------------------------------------------------------------------------------


def test_docs_complete_example_loads(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parents[3] / "docs" / "config.md"
    blocks = re.findall(r"```toml\n(.*?)```", docs.read_text(), flags=re.S)
    assert len(blocks) >= 2
    minimal, complete = blocks[0], next(b for b in blocks if "[defaults]" in b)
    assert minimal == MINIMAL
    suite = load_suite(write_suite(tmp_path, complete), check_files=False)
    assert [k.name for k in suite.kernels] == ["saxpy", "matmul"]
    assert suite.kernels[1].implementation == "cutlass"
    assert dict(suite.kernels[1].ptr_sizes) == {"y": "N", "c": "M * N"}
    assert len(suite.cases()) == 5


def test_every_problem_of_the_file_is_reported_at_once(tmp_path: Path) -> None:
    """Three mistakes in three places, one error listing all three."""
    text = (
        "[defaults]\nrounsd = 4\nthreshold = 2\n"
        + MINIMAL.replace('shapes = [{N = 2048}, {N = 4096}]', 'shapes = [{N = 0}]\nbaseline = ["pytorch-eager"]')
        + SECOND.replace('ref = "kernels/gemm_ref.py"\n', "")
    )
    path = write_suite(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    message = info.value.one_line()
    lines = message.splitlines()
    assert lines[0] == "kbench.toml: 5 problems:"
    assert lines[1].startswith('  - kbench.toml: [defaults]: unknown key "rounsd"') and "did you mean" in lines[1]
    assert lines[2].startswith('  - kbench.toml: [defaults]: "threshold" must be')
    assert any('kernels[0] ("saxpy"): unknown key "baseline"' in line for line in lines)
    assert any('kernels[0] ("saxpy"): shapes[0]: "N" must be a positive integer' in line for line in lines)
    assert any('kernels[1] ("gemm"): missing required key "ref"' in line for line in lines)
    assert info.value.exit_code == 2
    # One problem is still the single line it always was.
    assert load_error(tmp_path, MINIMAL.replace("2048", "0")).count("\n") == 0


def test_num_trials_has_one_meaning_in_code_and_docs() -> None:
    """Docs/config.md states what trials_per_round computes, and no doc calls
    num_trials "timed launches per round" any more."""
    from kbench_ci.suite.settings import job_settings, trials_per_round

    docs = Path(__file__).parents[3] / "docs"
    config_md = (docs / "config.md").read_text(encoding="utf-8")
    row = next(line for line in config_md.splitlines() if line.startswith("| `num_trials`"))
    rule = job_settings(SuiteSettings(), device="cpu").trials_per_round_rule
    assert rule == "max(10, num_trials // rounds)" and f"`{rule}`" in row
    assert "across all of `rounds`" in row and "not per round" in row
    assert trials_per_round(100, 10) == 10 and trials_per_round(100, 20) == 10 and trials_per_round(400, 10) == 40
    for name in ("config.md", "compare.md"):
        assert "timed launches per round" not in (docs / name).read_text(encoding="utf-8"), name


def test_a_build_command_in_defaults_is_for_the_cuda_kernels_and_a_python_kernel_may_inherit_it(tmp_path: Path) -> None:
    """Only a Python kernel's own "build" is refused; [defaults] serves a mixed suite."""
    suite = load_suite(write_suite(tmp_path, with_defaults('build = "nvcc -o {out} {src}"')))
    assert suite.kernels[0].build == "nvcc -o {out} {src}"


def test_every_size_expression_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    text = MINIMAL + "bytes = \"__import__('os')\"\nflops = \"N.real\"\n" + SECOND + 'bytes = "4 * M * N"\n'
    with pytest.raises(ConfigError) as info:
        load_suite(write_suite(tmp_path, text))
    message = info.value.message
    assert message.startswith("kbench.toml: 2 problems:"), message
    assert 'kernel "saxpy": bytes: ' in message and 'kernel "saxpy": flops: ' in message
    assert 'kernel "gemm"' not in message


@pytest.mark.parametrize("name", [".", ".."])
def test_a_kernel_named_dot_or_dot_dot_is_refused(tmp_path: Path, name: str) -> None:
    """Red team: a head kernel named ".." had its build folder (staging/head/..) be the
    whole staging folder, the base's library in it."""
    message = load_error(tmp_path, MINIMAL.replace('name = "saxpy"', f'name = "{name}"'))
    assert f'"name" {name!r}' in message and 'is not "." or ".."' in message
