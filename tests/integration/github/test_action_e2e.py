"""The GitHub Action end to end, run the way a runner runs it.

Nothing here calls a step function directly. The test reads ``action.yml`` and plays the
runner's part for each step in the file's order: it evaluates the step's ``if:`` and its
``env:`` mapping (``${{ inputs.* }}``, ``${{ steps.<id>.outputs.* }}``, ``${{ steps.<id>.outcome }}``,
``${{ github.* }}``), writes the step's ``run:`` script to a file and runs it with
``bash --noprofile --norc -eo pipefail`` in the step's working directory, with a fresh
``GITHUB_OUTPUT`` and ``GITHUB_STEP_SUMMARY`` file per step, and parses ``GITHUB_OUTPUT`` into
that step's outputs for the steps after it. So the real chain runs:
``kbench-ci-action resolve``, ``... compare`` (which starts the real
``kbench-ci compare`` with real worker subprocesses), ``summary``, ``comment`` (against a fake
GitHub on loopback, ``github_fake.FakeGitHub``: paginated list, create, update, 403) and
``gate``. Two steps are stand-ins: the install step (the test's own interpreter, where kbench-ci
is installed editable, is its ``python`` output) and ``actions/upload-artifact`` (its ``if:`` and
``with:`` are evaluated and recorded, nothing is uploaded). As in a composite action, inputs reach
the scripts only through the env names action.yml maps them to (a composite step gets no
``INPUT_*`` variables of its own), and ``GITHUB_TOKEN`` only through the comment step's mapping of
``inputs.github-token`` (default ``${{ github.token }}``, here a fake token).

The repository under test is a temporary git repository ("origin") with a one-kernel suite on
``main`` and one branch per scenario; each job clones it (like actions/checkout with
fetch-depth: 0), checks out the pull request's head and gets a ``pull_request`` event payload.
The kernel is PyTorch on CPU tensors that sleeps 2 ms per call (host_time measures it); the slow
head sleeps 4 ms, the wrong head adds 1. ``rounds = 6`` is the fewest that can give ``slower``
(Wilcoxon's p floor is 2/2**6); the threshold input is 10%, so the 2x slowdown is far above it and
an identical head is far from it. Each scenario's job runs once (module-scoped fixtures) and
several tests read it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from kbench_ci.github import action as action_steps
from kbench_ci.github.comment import REPORT_ONLY_NOTE, marker
from tests.integration.github.github_fake import FakeGitHub
from tests.support.suite_repo import GIT_ENV, TempRepo

pytestmark = pytest.mark.slow  # about a minute on 2 cores: six real compares

ROOT = Path(__file__).resolve().parents[3]
ACTION_YML = ROOT / "action.yml"
FAKE_TOKEN = "ghs_kbenchE2EfakeToken0123456789abcdef"
REPOSITORY = "octo/kernels"
SERVER_URL = "https://github.com"
RUN_ID = "4242"
RUN_URL = f"{SERVER_URL}/{REPOSITORY}/actions/runs/{RUN_ID}"
ARTIFACT_URL = f"{RUN_URL}/artifacts/77"
STEP_TIMEOUT_S = 300
_PROXY_VARS = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


# -- action.yml ----------------------------------------------------------------------------------
#
# ruamel.yaml's base loader keeps every scalar a string (as inputs and env values are for the
# runner) and an empty value an empty string.


def load_action() -> dict[str, Any]:
    return YAML(typ="base").load(ACTION_YML.read_text(encoding="utf-8"))


# -- the runner's side of a step: GITHUB_OUTPUT and expressions ---------------------------------


def parse_github_output(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT as the runner reads it: ``name=value`` lines and ``name<<DELIM`` blocks."""
    outputs: dict[str, str] = {}
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line:
            i += 1
            continue
        equals, heredoc = line.find("="), line.find("<<")
        if heredoc > 0 and (equals == -1 or heredoc < equals):
            name, delimiter = line[:heredoc], line[heredoc + 2 :]
            try:
                end = lines.index(delimiter, i + 1)
            except ValueError:
                raise AssertionError(f"GITHUB_OUTPUT: {name}<<{delimiter} is never closed") from None
            outputs[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        elif equals > 0:
            outputs[line[:equals]] = line[equals + 1 :]
            i += 1
        else:
            raise AssertionError(f"GITHUB_OUTPUT: malformed line {line!r}")
    return outputs


_STATUS_FUNCTION = re.compile(r"\b(success|failure|always|cancelled)\(\)")
_COMPARISON = re.compile(r"^([A-Za-z_][\w.-]*)\s*(==|!=)\s*'([^']*)'$")
_REFERENCE = re.compile(r"^[A-Za-z_][\w.-]*$")


@dataclass
class Context:
    """The expression contexts a step of this composite action can see."""

    inputs: dict[str, str]
    github: dict[str, str]
    step_ids: tuple[str, ...]
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    job_failed: bool = False
    runner: dict[str, str] = field(default_factory=dict)

    def lookup(self, path: str) -> str:
        head, _, rest = path.partition(".")
        if head == "inputs":
            if rest not in self.inputs:
                raise AssertionError(f"action.yml reads inputs.{rest}, which it does not declare")
            return self.inputs[rest]
        if head == "github":
            if rest not in self.github:
                raise AssertionError(f"the test's runner does not provide github.{rest}")
            return self.github[rest]
        if head == "runner" and rest in self.runner:
            return self.runner[rest]
        if head == "steps":
            step_id, _, what = rest.partition(".")
            if step_id not in self.step_ids:
                raise AssertionError(f"action.yml reads steps.{step_id}, which is no step id")
            state = self.steps.get(step_id, {"outputs": {}, "outcome": "", "conclusion": ""})
            if what.startswith("outputs."):
                return state["outputs"].get(what.removeprefix("outputs."), "")
            if what in ("outcome", "conclusion"):
                return state[what]
        raise AssertionError(f"the test's runner cannot evaluate {path!r}")

    def evaluate(self, expression: str) -> bool | str:
        """``&&`` of ``!``-prefixed terms: status functions, ``ref == 'x'`` / ``ref != 'x'``, refs."""
        if "||" in expression or "(" in expression.replace("()", ""):
            raise AssertionError(f"the test's runner cannot evaluate {expression!r}")
        terms = [term.strip() for term in expression.split("&&")]
        if len(terms) == 1 and _REFERENCE.match(terms[0]):
            return self.lookup(terms[0])
        return all(self._term(term) for term in terms)

    def _term(self, term: str) -> bool:
        negate = False
        while term.startswith("!"):
            negate, term = not negate, term[1:].strip()
        if match := _STATUS_FUNCTION.fullmatch(term):
            value = {"success": not self.job_failed, "failure": self.job_failed, "always": True,
                     "cancelled": False}[match.group(1)]
        elif match := _COMPARISON.match(term):
            left, right = self.lookup(match.group(1)).lower(), match.group(3).lower()  # GitHub ignores case
            value = left == right if match.group(2) == "==" else left != right
        elif _REFERENCE.match(term):
            value = self.lookup(term) != ""
        else:
            raise AssertionError(f"the test's runner cannot evaluate {term!r}")
        return value != negate

    def condition(self, text: str) -> bool:
        """A step's ``if:``; without a status function, ``success() &&`` is implied."""
        expression = _strip_template(text.strip())
        value = bool(self.evaluate(expression))
        return value if _STATUS_FUNCTION.search(expression) else value and not self.job_failed

    def render(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            value = self.evaluate(match.group(1).strip())
            return ("true" if value else "false") if isinstance(value, bool) else value

        return re.sub(r"\$\{\{(.*?)\}\}", one, text, flags=re.DOTALL)


def _strip_template(text: str) -> str:
    if text.startswith("${{") and text.endswith("}}"):
        return text[3:-2].strip()
    if "${{" in text:
        raise AssertionError(f"an if: that mixes text and expressions: {text!r}")
    return text


# -- a job that uses the action -------------------------------------------------------------------


@dataclass
class StepRun:
    id: str
    ran: bool
    outcome: str  # success | failure | skipped
    exit_code: int | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    log: str = ""
    env: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    with_: dict[str, str] = field(default_factory=dict)


@dataclass
class JobRun:
    steps: dict[str, StepRun]
    outputs: dict[str, str]
    context: Context
    workspace: Path
    runner_temp: Path
    home: Path

    @property
    def conclusion(self) -> str:
        return "failure" if any(step.outcome == "failure" for step in self.steps.values()) else "success"

    @property
    def log(self) -> str:
        return "\n".join(step.log for step in self.steps.values())

    @property
    def summary(self) -> str:
        """The job summary: every step's GITHUB_STEP_SUMMARY, in order."""
        return "".join(step.summary for step in self.steps.values())

    @property
    def report_dir(self) -> Path:
        return Path(self.steps["resolve"].outputs["report-dir"])

    def results(self) -> dict[str, Any]:
        return json.loads((self.report_dir / "results.json").read_text(encoding="utf-8"))

    def report(self) -> str:
        return (self.report_dir / "benchmark.md").read_text(encoding="utf-8")


def step_key(step: Mapping[str, Any], n: int) -> str:
    """The step's id; for a step without one, the action_steps step it runs, or 'upload'."""
    if "id" in step:
        return str(step["id"])
    if match := re.search(r"/kbench-ci-action\" (\w+)", step.get("run", "")):
        return match.group(1)
    if "actions/upload-artifact@" in step.get("uses", ""):
        return "upload"
    if "actions/cache@" in step.get("uses", ""):
        return "cache"
    return f"step{n}"


class ActionRunner:
    """Plays the runner for one job whose only step is ``uses: <this action>``."""

    def __init__(
        self, action: Mapping[str, Any], *, home: Path, workspace: Path, event_name: str,
        payload: Mapping[str, Any], api_url: str, inputs: Mapping[str, str],
    ) -> None:
        self.action = action
        self.home = home
        self.workspace = workspace
        self.runner_temp = home / "temp"
        self.runner_temp.mkdir(parents=True)
        (home / "tmp").mkdir()
        event_path = home / "event.json"
        event_path.write_text(json.dumps(payload), encoding="utf-8")
        declared = action["inputs"]
        unknown = set(inputs) - set(declared)
        assert not unknown, f"action.yml has no inputs {sorted(unknown)}"
        self.github = {"action_path": str(ROOT), "token": FAKE_TOKEN, "workspace": str(workspace),
                       "repository": REPOSITORY, "event_name": event_name, "sha": "0" * 40}
        bootstrap = Context({}, self.github, ())
        self.inputs = {name: inputs[name] if name in inputs else bootstrap.render(spec.get("default", ""))
                       for name, spec in declared.items()}
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("GITHUB_", "INPUT_", "KBENCH_", "RUNNER_", "ACTIONS_"))
                and k.lower() not in _PROXY_VARS and k != "CUDA_VISIBLE_DEVICES"}
        self.base_env = {
            **base, "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event_name,
            "GITHUB_EVENT_PATH": str(event_path), "GITHUB_REPOSITORY": REPOSITORY,
            "GITHUB_WORKSPACE": str(workspace), "GITHUB_API_URL": api_url,
            "GITHUB_SERVER_URL": SERVER_URL, "GITHUB_RUN_ID": RUN_ID,
            "GITHUB_ACTION_PATH": str(ROOT), "RUNNER_TEMP": str(self.runner_temp), "RUNNER_OS": "Linux",
            "TMPDIR": str(home / "tmp"),
        }
        self._counter = 0

    def run(self) -> JobRun:
        steps = self.action["runs"]["steps"]
        assert self.action["runs"]["using"] == "composite"
        context = Context(dict(self.inputs), self.github, tuple(s["id"] for s in steps if "id" in s),
                          runner={"temp": str(self.runner_temp), "os": "Linux", "arch": "X64"})
        done: dict[str, StepRun] = {}
        for n, step in enumerate(steps):
            step_id = step_key(step, n)
            result = self._step(step, step_id, context)
            done[step_id] = result
            context.steps[step_id] = {"outputs": result.outputs, "outcome": result.outcome,
                                      "conclusion": result.outcome}
            context.job_failed = context.job_failed or result.outcome == "failure"
        outputs = {name: context.render(spec["value"]) for name, spec in self.action["outputs"].items()}
        return JobRun(done, outputs, context, self.workspace, self.runner_temp, self.home)

    def rerun(self, job: JobRun, step_id: str, **inputs: str) -> StepRun:
        """Run one step again after the job, with some inputs changed (nothing else reruns)."""
        (step,) = [s for n, s in enumerate(self.action["runs"]["steps"]) if step_key(s, n) == step_id]
        context = Context({**job.context.inputs, **inputs}, self.github, job.context.step_ids,
                          dict(job.context.steps), job.context.job_failed, dict(job.context.runner))
        return self._step(step, step_id, context, force=True)

    def _step(self, step: Mapping[str, Any], step_id: str, context: Context, *, force: bool = False) -> StepRun:
        if not force and not context.condition(step.get("if", "success()")):
            return StepRun(step_id, ran=False, outcome="skipped")
        if "uses" in step:  # actions/upload-artifact and actions/cache: recorded, not run; outputs as v4 sets them
            outputs = {"cache-hit": "false"} if step_id == "cache" else {"artifact-id": "77", "artifact-url": ARTIFACT_URL}
            return StepRun(step_id, ran=True, outcome="success", outputs=outputs,
                           with_={k: context.render(v) for k, v in step.get("with", {}).items()})
        if step_id == "setup":
            assert '-m venv' in step["run"] and 'python=' in step["run"], "the install step changed"
            return StepRun(step_id, ran=True, outcome="success", outputs={"python": sys.executable})
        assert step.get("shell") == "bash", step
        self._counter += 1
        tag = f"{self._counter:02d}-{step_id}"
        output_file, summary_file = self.home / f"output-{tag}", self.home / f"summary-{tag}.md"
        output_file.touch()
        summary_file.touch()
        script = self.home / f"step-{tag}.sh"
        script.write_text(step["run"], encoding="utf-8")
        step_env = {name: context.render(value) for name, value in step.get("env", {}).items()}
        env = {**self.base_env, **step_env, "GITHUB_OUTPUT": str(output_file),
               "GITHUB_STEP_SUMMARY": str(summary_file)}
        cwd = self.workspace / context.render(step.get("working-directory", "."))
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=cwd, env=env, check=False,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=STEP_TIMEOUT_S,
        )
        return StepRun(
            step_id, ran=True, outcome="success" if done.returncode == 0 else "failure",
            exit_code=done.returncode,
            outputs=parse_github_output(output_file.read_text(encoding="utf-8")),
            log=done.stdout, env=step_env, summary=summary_file.read_text(encoding="utf-8"),
        )


# -- the repository under test -----------------------------------------------------------------------

KERNEL = '''\
"""Scale by two ({note})."""
import time

import torch

DELAY_S = {delay}


def setup(N, **_):
    x = torch.randn(N, dtype=torch.float32)
    out = torch.empty(N, dtype=torch.float32)
    return {{"inputs": {{"x": x, "out": out}}, "outputs": ["out"]}}


def run_kernel(x, out, **_):
    time.sleep(DELAY_S)  # the kernel's "work": host_time timing measures it
    torch.mul(x, 2.0, out=out)
{wrong}'''

REF = '''\
def reference(x, **_):
    return x * 2.0
'''

SUITE = '''\
[defaults]
num_warmup = 2
num_trials = 10
discard_first = 1
correctness_trials = 2
rounds = 6
timeout = 120

[[kernels]]
name = "scale"
solution = "kernels/scale.py"
ref = "kernels/scale_ref.py"
implementation = "pytorch"
shapes = [{N = 256}]
'''


def kernel(note: str, delay: float = 0.002, wrong: bool = False) -> dict[str, str | None]:
    body = KERNEL.format(note=note, delay=delay, wrong="    out.add_(1.0)\n" if wrong else "")
    return {"kernels/scale.py": body}


@dataclass(frozen=True)
class Origin:
    root: Path
    base: str
    pass1: str  # the kernel file changed, not its speed
    pass2: str  # a second push on top of pass1
    slow: str  # sleeps 4 ms instead of 2
    wrong: str  # off by one


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Origin:
    repo = TempRepo(tmp_path_factory.mktemp("origin") / "kernels")
    base = repo.commit({"kbench.toml": SUITE, "kernels/scale_ref.py": REF, **kernel("base")}, "suite")

    def branch(name: str, start: str, files: dict[str, str | None], message: str) -> str:
        repo.git("checkout", "-q", "-b", name, start)
        return repo.commit(files, message)

    pass1 = branch("tidy", base, kernel("tidied docstring, same speed"), "tidy the kernel")
    pass2 = repo.commit({"README.md": "second push\n"}, "second push")
    slow = branch("slow", base, kernel("now twice as slow", delay=0.004), "slow kernel")
    wrong = branch("wrong", base, kernel("now wrong", wrong=True), "wrong kernel")
    repo.git("checkout", "-q", "main")
    return Origin(repo.root, base, pass1, pass2, slow, wrong)


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    return load_action()


@pytest.fixture(scope="module")
def jobs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("jobs")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def run_job(
    action: Mapping[str, Any], origin: Origin, root: Path, name: str, *, head: str, pr: int,
    github: FakeGitHub, inputs: Mapping[str, str] | None = None, labels: tuple[str, ...] = (),
) -> tuple[ActionRunner, JobRun]:
    """One pull_request job: check out the PR head (full history) and run the action."""
    home = root / name
    home.mkdir()
    workspace = home / "workspace"
    git(home, "clone", "-q", str(origin.root), str(workspace))
    git(workspace, "checkout", "-q", "--detach", head)
    payload = {
        "action": "synchronize", "number": pr,
        "pull_request": {"number": pr, "base": {"ref": "main", "sha": origin.base},
                         "head": {"ref": f"feature-{pr}", "sha": head},
                         "labels": [{"id": n, "name": label} for n, label in enumerate(labels)]},
        "repository": {"full_name": REPOSITORY, "default_branch": "main"},
    }
    runner = ActionRunner(
        action, home=home / "runner", workspace=workspace, event_name="pull_request", payload=payload,
        api_url=github.api_url,
        inputs={"threshold": "10%", "extra-args": "--device cpu", **(inputs or {})},
    )
    return runner, runner.run()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGitHub]:
    fake = FakeGitHub().start()
    yield fake
    fake.stop()


# -- scenario jobs (each runs once) ---------------------------------------------------------------


@dataclass
class Sticky:
    first: JobRun
    second: JobRun
    calls_before_first: int
    calls_after_first: int
    after_first: list[dict[str, Any]]  # PR #7's comments between the two runs


@pytest.fixture(scope="module")
def sticky(action: dict, origin: Origin, jobs_root: Path, server: FakeGitHub) -> Sticky:
    """PR #7: an identical-speed head, then a second push. First run comment: always; second
    run the default (on-change)."""
    before = len(server.requests)
    _, first = run_job(action, origin, jobs_root, "pass-1", head=origin.pass1, pr=7, github=server,
                       inputs={"comment": "always"})
    after = len(server.requests)
    snapshot = [dict(c) for c in server.comments_on(7)]
    _, second = run_job(action, origin, jobs_root, "pass-2", head=origin.pass2, pr=7, github=server)
    return Sticky(first, second, before, after, snapshot)


@dataclass
class Busy:
    job: JobRun
    bot_id: int
    human_id: int
    calls_before: int
    calls_after: int


@pytest.fixture(scope="module")
def busy(action: dict, origin: Origin, jobs_root: Path, server: FakeGitHub) -> Busy:
    """PR #8 with 120 comments by people, one person's comment that starts with the marker
    (page 1), then the earlier run's bot comment (page 2 at 100 per page)."""
    for n in range(120):
        server.add_comment(8, f"review remark {n}")
    human = server.add_comment(8, marker() + "\nquoting the bot", login="reviewer")
    bot = server.add_comment(8, marker() + "\nan earlier kbench-ci report", login="github-actions[bot]", bot=True)
    calls = len(server.requests)
    _, job = run_job(action, origin, jobs_root, "busy", head=origin.pass1, pr=8, github=server)
    return Busy(job, bot, human, calls, len(server.requests))


@dataclass
class Failing:
    runner: ActionRunner
    job: JobRun


@pytest.fixture(scope="module")
def slower(action: dict, origin: Origin, jobs_root: Path, server: FakeGitHub) -> Failing:
    runner, job = run_job(action, origin, jobs_root, "slower", head=origin.slow, pr=9, github=server)
    return Failing(runner, job)


@pytest.fixture(scope="module")
def incorrect(action: dict, origin: Origin, jobs_root: Path, server: FakeGitHub) -> Failing:
    runner, job = run_job(action, origin, jobs_root, "incorrect", head=origin.wrong, pr=10, github=server)
    return Failing(runner, job)


@dataclass
class Forbidden:
    server: FakeGitHub
    job: JobRun


@pytest.fixture(scope="module")
def forbidden(action: dict, origin: Origin, jobs_root: Path) -> Iterator[Forbidden]:
    """A pull request from a fork: the token may read but not write (403 on POST/PATCH)."""
    fake = FakeGitHub(forbid_writes=True).start()
    try:
        _, job = run_job(action, origin, jobs_root, "forbidden", head=origin.wrong, pr=11, github=fake)
        yield Forbidden(fake, job)
    finally:
        fake.stop()


# -- helpers for assertions -------------------------------------------------------------------------


def explain(job: JobRun) -> str:
    return "\n".join(f"--- {s.id}: {s.outcome} (exit {s.exit_code}) {s.outputs}\n{s.log[-3000:]}"
                     for s in job.steps.values() if s.ran)


def case_verdicts(job: JobRun) -> dict[str, str]:
    return {case["case_id"]: case["verdict"] for case in job.results()["cases"]}


def assert_ran_cleanly_up_to_gate(job: JobRun) -> None:
    """Every step ran (upload included) and all but the gate succeeded; the checkout is untouched."""
    assert [s.id for s in job.steps.values() if s.ran] == [
        "setup", "resolve", "cache", "compare", "summary", "upload", "comment", "history", "gate"], explain(job)
    for step in job.steps.values():
        if step.id != "gate":
            assert step.outcome == "success", explain(job)
    assert job.steps["compare"].outputs == {"exit-code": "0", "tampered": "false"}, explain(job)  # --no-fail
    assert FAKE_TOKEN not in job.log
    assert git(job.workspace, "status", "--porcelain", "--ignored") == ""
    assert git(job.workspace, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert list((job.home / "tmp").iterdir()) == []  # the compare's temporary worktrees are gone


JOB_FAILS_NOTE = (
    "The job fails: the action's Gate step fails it (fail-on-regression: true). A known regression can be "
    "accepted with the pull request label 'kbench-ci: accept' (never an incorrect case)."
)


def comment_body(job: JobRun) -> str:
    """The marker, the links to the run and the artifact, then benchmark.md as written less the
    sections left to the job summary (per-case details, environment, how it was measured)."""
    links = f"[Workflow run]({RUN_URL}) · [Report artifact `kbench-ci-report`]({ARTIFACT_URL})"
    report = job.report()
    assert "## How it was measured" in report and "## Environment" in report
    summary = report.split("\n## Cases\n")[0].rstrip() + "\n"
    return f"{marker()}\n{links}\n\n{summary}\n{REPORT_ONLY_NOTE}\n"


def comment_calls(server: FakeGitHub, start: int, end: int | None = None) -> list[tuple[str, str]]:
    return [(r.method, r.path + ("?page=" + r.query["page"][0] if "page" in r.query else ""))
            for r in server.requests[start:end]]


# -- the action file itself -------------------------------------------------------------------------


def test_action_yml_is_read_as_the_steps_this_test_runs(action: dict) -> None:
    steps = action["runs"]["steps"]
    assert [s.get("id") for s in steps] == ["setup", "resolve", "cache", "compare", "summary", "upload", "comment", "history", None]
    assert [step_key(s, n) for n, s in enumerate(steps)] == [
        "setup", "resolve", "cache", "compare", "summary", "upload", "comment", "history", "gate"]
    for n, step in enumerate(steps[1:], start=1):
        if "run" in step:
            # The compare step execs: no shell holding the step's environment stays above the kernels.
            prefix = "exec " if step_key(step, n) == "compare" else ""
            # the venv's console script, never `python -m` in the checkout (the pull request's files)
            command = f'{prefix}"${{KBENCH_VENV_PYTHON%/*}}/kbench-ci-action" {step_key(step, n)}'
            if step_key(step, n) == "gate":
                # after pull-request code changed the venv, the gate fails before running its Python
                assert step["run"].startswith('if [ "$KBENCH_TAMPERED" = "true" ]; then'), step["run"]
                assert step["run"].rstrip().endswith(command)
            else:
                assert step["run"] == command
            assert "${{" not in step["run"]
    assert steps[5]["uses"].startswith("actions/upload-artifact@")
    assert steps[3]["if"] == "steps.resolve.outputs.comparable == 'true'"
    assert steps[6]["if"].startswith("${{ !cancelled() && inputs.comment != 'never'")
    # The cache step restores and saves the folder the compare step's --cache-dir names.
    assert steps[2]["uses"].startswith("actions/cache@")
    assert steps[2]["with"]["path"] == "${{ runner.temp }}/" + action_steps.CACHE_FOLDER
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"


def test_github_output_parser_reads_both_forms() -> None:
    text = "a=1\nb<<ghadelimiter_x\nline one\nline=two\nghadelimiter_x\nc=\n"
    assert parse_github_output(text) == {"a": "1", "b": "line one\nline=two", "c": ""}
    with pytest.raises(AssertionError):
        parse_github_output("x<<EOF\nnever closed\n")


# -- 1. pass ---------------------------------------------------------------------------------------


def test_pass_resolves_the_pull_request(sticky: Sticky, origin: Origin) -> None:
    job = sticky.first
    resolved = job.steps["resolve"].outputs
    assert (resolved["base-sha"], resolved["head-sha"], resolved["pr-number"]) == (origin.base, origin.pass1, "7")
    assert resolved["report-dir"] == str(job.runner_temp / "kbench-ci" / "default" / "report")
    # What resolve wrote reached compare through action.yml's env mapping.
    assert job.steps["compare"].env["KBENCH_BASE"] == origin.base
    assert job.steps["compare"].env["KBENCH_HEAD"] == origin.pass1
    assert job.steps["compare"].env["KBENCH_EXTRA_ARGS"] == "--device cpu"
    data = job.results()
    assert (data["base"]["sha"], data["head"]["sha"]) == (origin.base, origin.pass1)
    assert data["settings"]["device"] == "cpu" and data["settings"]["timing_method"] == "host_time"
    assert data["settings"]["rounds"] == 6
    # The command the compare step started: action_steps' argv, then the extra-args input.
    assert Path(data["command_line"][0]).name == "kbench-ci"
    assert data["command_line"][1:] == [
        "compare", "--base", origin.base, "--head", origin.pass1, "--output-dir", str(job.report_dir),
        "--threshold", "10%", "--changed-only", "--cache-dir", str(job.runner_temp / action_steps.CACHE_FOLDER),
        "--no-fail", "--job-note", JOB_FAILS_NOTE, "--device", "cpu"]  # a pull request: --changed-only
    assert [case["threshold"] for case in data["cases"]] == [0.1]
    # The build cache step ran on the pull request, with the folder the compare used.
    assert job.steps["cache"].ran and job.steps["cache"].with_["path"] == str(job.runner_temp / action_steps.CACHE_FOLDER)


def test_pass_gate_and_outputs(sticky: Sticky) -> None:
    job = sticky.first
    assert_ran_cleanly_up_to_gate(job)
    assert set(case_verdicts(job).values()) <= {"unchanged", "inconclusive"}, job.report()
    assert job.results()["gate"]["passed"] is True
    assert job.steps["gate"].exit_code == 0 and job.conclusion == "success", explain(job)
    summary = job.steps["summary"].outputs
    assert (summary["verdict"], summary["regressions"], summary["has-report"]) == ("passed", "0", "true")
    assert job.outputs["verdict"] == "passed" and job.outputs["regressions"] == "0"
    assert job.outputs["report-path"] == str(job.report_dir / "benchmark.md")
    assert job.outputs["results-path"] == str(job.report_dir / "results.json")
    assert job.steps["upload"].with_["path"] == str(job.report_dir)  # the artifact upload would run
    assert job.steps["upload"].with_["name"] == "kbench-ci-report"
    assert (job.report_dir / "pr-number.txt").read_text() == "7\n"


def test_pass_writes_the_report_to_the_job_summary(sticky: Sticky) -> None:
    job = sticky.first
    report = job.report()
    assert "gate passed" in report and "`scale`" in report
    assert job.steps["summary"].summary == report
    assert job.summary == report  # no other step writes to the summary on a pass


def test_pass_creates_one_comment(sticky: Sticky, server: FakeGitHub) -> None:
    job = sticky.first
    (comment,) = sticky.after_first
    assert comment["body"] == comment_body(job)
    assert comment["user"]["type"] == "Bot"
    assert job.steps["comment"].outputs == {"comment-url": comment["html_url"], "comment-action": "created"}
    assert job.outputs["comment-url"] == comment["html_url"]
    assert comment_calls(server, sticky.calls_before_first, sticky.calls_after_first) == [
        ("GET", "/repos/octo/kernels/issues/7/comments"), ("POST", "/repos/octo/kernels/issues/7/comments")]
    post = server.requests[sticky.calls_after_first - 1]
    assert post.headers["authorization"] == f"Bearer {FAKE_TOKEN}"


# -- 2. a second run updates the same comment ------------------------------------------------------


def test_second_push_updates_the_comment(sticky: Sticky, server: FakeGitHub, origin: Origin) -> None:
    job = sticky.second
    assert_ran_cleanly_up_to_gate(job)
    assert job.steps["resolve"].outputs["head-sha"] == origin.pass2
    assert job.steps["gate"].exit_code == 0 and job.outputs["verdict"] == "passed", explain(job)
    (comment,) = server.comments_on(7)  # still exactly one
    assert comment["body"] == comment_body(job)
    assert origin.pass2[:12] in comment["body"] and origin.pass1[:12] not in comment["body"]
    assert comment_calls(server, sticky.calls_after_first, sticky.calls_after_first + 2) == [
        ("GET", "/repos/octo/kernels/issues/7/comments"),
        ("PATCH", f"/repos/octo/kernels/issues/comments/{comment['id']}")]
    assert job.steps["comment"].outputs == {"comment-url": comment["html_url"], "comment-action": "updated"}
    assert job.steps["comment"].outputs["comment-url"] == sticky.first.steps["comment"].outputs["comment-url"]


def test_comment_on_page_two_is_found_and_updated(busy: Busy, server: FakeGitHub) -> None:
    job = busy.job
    assert_ran_cleanly_up_to_gate(job)
    calls = comment_calls(server, busy.calls_before, busy.calls_after)
    assert calls == [
        ("GET", "/repos/octo/kernels/issues/8/comments"),
        ("GET", "/repos/octo/kernels/issues/8/comments?page=2"),
        ("PATCH", f"/repos/octo/kernels/issues/comments/{busy.bot_id}"),
    ]
    assert len(server.comments_on(8)) == 122  # nothing added
    assert server.comments[busy.bot_id]["body"] == comment_body(job)
    assert server.comments[busy.human_id]["body"] == marker() + "\nquoting the bot"  # a person's copy is left alone
    assert job.steps["comment"].outputs["comment-action"] == "updated"
    assert job.steps["comment"].outputs["comment-url"].endswith(f"#issuecomment-{busy.bot_id}")


# -- 3. slower ---------------------------------------------------------------------------------------


def test_slower_fails_the_job(slower: Failing, server: FakeGitHub) -> None:
    job = slower.job
    assert_ran_cleanly_up_to_gate(job)
    assert case_verdicts(job) == {"scale[N=256]": "slower"}, job.report()
    (case,) = job.results()["cases"]
    assert case["ratio"] > 1.5 and case["remeasured"] is True
    assert job.outputs["verdict"] == "failed"
    assert int(job.outputs["regressions"]) >= 1
    gate = job.steps["gate"]
    assert gate.exit_code == 1 and job.conclusion == "failure", explain(job)
    assert gate.log.startswith("::error::kbench-ci: 1 slower")
    assert "slower" in job.summary and job.steps["summary"].summary == job.report()
    # on-change: a regression is a change, so the comment is created.
    (comment,) = server.comments_on(9)
    assert job.steps["comment"].outputs["comment-action"] == "created"
    assert "slower" in comment["body"]


def test_slower_without_fail_on_regression_passes_the_job(slower: Failing) -> None:
    gate = slower.runner.rerun(slower.job, "gate", **{"fail-on-regression": "false"})
    assert gate.env["KBENCH_FAIL_ON_REGRESSION"] == "false"
    assert gate.exit_code == 0, gate.log
    assert gate.log.startswith("::warning::kbench-ci: 1 slower") and "fail-on-regression is false" in gate.log


# -- 4. incorrect ------------------------------------------------------------------------------------


def test_incorrect_fails_the_job(incorrect: Failing, server: FakeGitHub) -> None:
    job = incorrect.job
    assert_ran_cleanly_up_to_gate(job)
    assert case_verdicts(job) == {"scale[N=256]": "incorrect"}, job.report()
    (case,) = job.results()["cases"]
    assert case["head"]["status"] == "incorrect" and case["base"]["status"] == "ok"
    summary = job.steps["summary"].outputs
    assert (summary["verdict"], summary["regressions"]) == ("failed", "1")
    assert job.steps["gate"].exit_code == 1 and job.conclusion == "failure", explain(job)
    assert job.steps["gate"].log.startswith("::error::kbench-ci: 1 incorrect")
    assert "incorrect" in job.summary
    (comment,) = server.comments_on(10)
    assert "incorrect" in comment["body"]


def test_incorrect_without_fail_on_regression_passes_the_job(incorrect: Failing) -> None:
    gate = incorrect.runner.rerun(incorrect.job, "gate", **{"fail-on-regression": "false"})
    assert gate.exit_code == 0 and gate.log.startswith("::warning::"), gate.log


# -- 5. 403 ------------------------------------------------------------------------------------------


def test_forbidden_comment_is_a_warning_and_the_gate_still_decides(forbidden: Forbidden) -> None:
    job = forbidden.job
    assert_ran_cleanly_up_to_gate(job)  # the comment step succeeded despite the 403
    step = job.steps["comment"]
    assert step.exit_code == 0
    (warning,) = [line for line in step.log.splitlines() if line.startswith("::warning::")]
    assert "octo/kernels#11" in warning and "fork" in warning
    assert step.outputs == {"comment-url": "", "comment-action": "forbidden"}
    assert job.outputs["comment-url"] == ""
    # It tried (the list, then a create answered 403) and nothing was written.
    assert [(r.method, r.path) for r in forbidden.server.requests] == [
        ("GET", "/repos/octo/kernels/issues/11/comments"), ("POST", "/repos/octo/kernels/issues/11/comments")]
    assert forbidden.server.comments_on(11) == []
    # The server echoed the token in its 403 message; no log line carries it.
    assert FAKE_TOKEN not in job.log
    # The verdict still decides the job, and the report is on disk and in the summary.
    assert job.outputs["verdict"] == "failed"
    assert job.steps["gate"].exit_code == 1 and job.conclusion == "failure"
    for name in ("benchmark.md", "results.json", "pr-number.txt"):
        assert (job.report_dir / name).is_file(), name
    assert job.steps["summary"].summary == job.report()
    assert "incorrect" in job.summary


def test_pull_request_target_is_refused_unless_allowed(action: dict, origin: Origin, jobs_root: Path) -> None:
    """pull_request_target gives the job the base repository's write token and secrets, and the
    benchmark runs the pull request's code: the action refuses it unless an input allows it."""
    home = jobs_root / "target"
    home.mkdir()
    workspace = home / "workspace"
    git(home, "clone", "-q", str(origin.root), str(workspace))
    payload = {"pull_request": {"number": 12, "base": {"ref": "main", "sha": origin.base},
                                "head": {"ref": "slow", "sha": origin.slow}}}
    runner = ActionRunner(action, home=home / "runner", workspace=workspace, event_name="pull_request_target",
                          payload=payload, api_url="http://127.0.0.1:9", inputs={"comment": "never"})
    job = runner.run()
    resolve = job.steps["resolve"]
    assert (resolve.outcome, resolve.exit_code) == ("failure", 2), explain(job)
    assert "::error::kbench-ci resolve: refusing to benchmark on pull_request_target" in resolve.log
    assert [s.id for s in job.steps.values() if s.ran] == ["setup", "resolve"], explain(job)

    allowed = runner.rerun(job, "resolve", **{"allow-pull-request-target": "true"})
    assert allowed.outcome == "success", allowed.log
    assert allowed.outputs["head-sha"] == origin.slow


# -- 6. what a failed gate's comment says --------------------------------


def test_a_failed_comment_says_the_job_fails_links_the_run_and_reproduces(slower: Failing, origin: Origin,
                                                                          server: FakeGitHub) -> None:
    job = slower.job
    (comment,) = server.comments_on(9)
    body = comment["body"]
    # What really happens to the job, not the --no-fail the action runs compare with.
    assert "--no-fail" not in body
    assert "The job fails: the action's Gate step fails it (fail-on-regression: true)." in body
    # Links to the run and to the uploaded artifact, from GITHUB_SERVER_URL/REPOSITORY/RUN_ID.
    assert f"[Workflow run]({RUN_URL})" in body and f"({ARTIFACT_URL})" in body
    # The local command for the failing case: the base the gate used, the failing kernel.
    assert "## Reproduce locally" in body
    assert f"\nkbench-ci compare --base {origin.base} --kernel scale  # " in body
    assert job.outputs["run-url"] == RUN_URL and job.outputs["artifact-url"] == ARTIFACT_URL


def test_every_output_a_step_writes_is_declared(action: dict, slower: Failing, sticky: Sticky) -> None:
    declared = {spec["value"] for spec in action["outputs"].values()}
    for job in (slower.job, sticky.first):
        for step in job.steps.values():
            if step.id in ("setup", "upload", "cache"):  # the venv's python (internal); the actions' own
                continue
            for name in step.outputs:
                assert f"${{{{ steps.{step.id}.outputs.{name} }}}}" in declared, f"{step.id}.{name} is not declared"


# -- 7. an accepted regression ----------------------------------------------------


@pytest.fixture(scope="module")
def accepted(action: dict, origin: Origin, jobs_root: Path, server: FakeGitHub) -> Failing:
    """PR #13: the slow head again, with the label that accepts known regressions."""
    runner, job = run_job(action, origin, jobs_root, "accepted", head=origin.slow, pr=13, github=server,
                          labels=("needs review", "kbench-ci: accept"))
    return Failing(runner, job)


def test_the_accept_label_lets_a_slower_head_pass(accepted: Failing, server: FakeGitHub) -> None:
    job = accepted.job
    assert_ran_cleanly_up_to_gate(job)
    assert job.steps["resolve"].outputs["accept-label"] == "kbench-ci: accept"
    (case,) = job.results()["cases"]
    assert case["verdict"] == "slower" and case["accepted"] is True, job.report()
    gate = job.results()["gate"]
    assert gate["passed"] is True and gate["accepted_cases"] == ["scale[N=256]"] and gate["counts"]["slower"] == 0
    assert gate["summary"] == "1 slower (accepted) — gate passed"
    assert job.outputs["verdict"] == "passed" and job.outputs["regressions"] == "0"
    assert job.steps["gate"].exit_code == 0 and job.conclusion == "success", explain(job)
    (comment,) = server.comments_on(13)
    assert "slower (accepted)" in comment["body"]
    assert "the pull request has the label 'kbench-ci: accept'" in comment["body"]


def test_an_accept_label_of_another_name_accepts_nothing(action: dict, accepted: Failing) -> None:
    resolve = accepted.runner.rerun(accepted.job, "resolve", **{"accept-label": "perf-ok"})
    assert resolve.outcome == "success" and resolve.outputs["accept-label"] == ""


def test_the_example_workflow_reruns_when_the_accept_label_changes(action: dict) -> None:
    workflow = YAML(typ="base").load((ROOT / ".github" / "workflows" / "gpu-example.yml").read_text(encoding="utf-8"))
    types = workflow["on"]["pull_request"]["types"]
    assert {"labeled", "unlabeled", "synchronize", "opened"} <= set(types)
    label = action["inputs"]["accept-label"]["default"]
    assert f"github.event.label.name == '{label}'" in workflow["jobs"]["benchmark"]["if"]
