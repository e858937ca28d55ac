"""GitHub Actions workflow commands (``::error file=…,title=…::message``), escaped as the runner
expects. Standard library only: the action's steps import it before any dependency is there."""

from __future__ import annotations

from kbench_ci.results.controls import show_controls


def _data(value: str) -> str:
    # a message may quote a pull request's words: its controls shown as escapes (ESC would play in
    # the log's viewer), the line breaks encoded as the runner expects
    return show_controls(value, keep="\r\n\t").replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(value: str) -> str:
    return _data(value).replace(":", "%3A").replace(",", "%2C")


def workflow_command(kind: str, message: str, **properties: str) -> str:
    """``::kind key=value,…::message``; properties with no value are left out."""
    given = ",".join(f"{key}={_property(value)}" for key, value in properties.items() if value)
    return f"::{kind}{' ' + given if given else ''}::{_data(message)}"
