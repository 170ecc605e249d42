"""An operator's owner rules file: read, refused when wrong, tried before the built-in table."""

from __future__ import annotations

import math
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agent_logging
from agent_logging import _state
from agent_logging.errors import ConfigurationError
from agent_logging.owner import (
    DEFAULT_RULES,
    OWNER_RULES_FORMAT_VERSION,
    Evidence,
    OwnerMatch,
    OwnerRule,
    classify,
    classify_evidence,
    load_rules,
    rules_with_defaults,
)
from tests.conftest import Captured

Write = Callable[[str | bytes], Path]
Capture = Callable[..., Captured]


@pytest.fixture
def write_rules(tmp_path: Path) -> Write:
    """``write_rules(text)`` writes an owner rules file and gives its path."""

    def write(text: str | bytes) -> Path:
        path = tmp_path / "owner-rules.toml"
        if isinstance(text, str):
            path.write_text(text, encoding="utf-8")
        else:
            path.write_bytes(text)
        return path

    return write


GOOD = """\
version = 1

[[rule]]
name = "bmc-timeout"
owner_layer = "node"
description = "the BMC did not answer in time"
message = ["BMC .{0,20} timed out"]

[[rule]]
name = "ipmi-failure"
owner_layer = "node"
type = "ironic.common.exception.IPMIFailure"

[[rule]]
name = "pyghmi"
owner_layer = "node"
module = ["pyghmi"]

[[rule]]
name = "inventory-overloaded"
owner_layer = "provider"
status = [503]
service = "inventory-api"

[[rule]]
name = "db-socket-timeout"
owner_layer = "db"
errno = [110]
layer = ["db"]

[[rule]]
name = "ansible-host-failed"
owner_layer = "node"
exit_code = 4
"""


def _error(module: str, name: str) -> type[Exception]:
    """An exception class as a third-party package defines it."""
    return type(name, (Exception,), {"__module__": module, "__qualname__": name})


IPMIFailure = _error("ironic.common.exception", "IPMIFailure")
IpmiException = _error("pyghmi.exceptions", "IpmiException")


class Unavailable(Exception):
    status_code = 503


def test_a_good_file_gives_one_rule_per_table_in_order(write_rules: Write) -> None:
    rules = load_rules(write_rules(GOOD))
    assert [(rule.name, rule.owner_layer) for rule in rules] == [
        ("bmc-timeout", "node"),
        ("ipmi-failure", "node"),
        ("pyghmi", "node"),
        ("inventory-overloaded", "provider"),
        ("db-socket-timeout", "db"),
        ("ansible-host-failed", "node"),
    ]
    assert rules[0].description == "the BMC did not answer in time"
    assert rules[0].message_patterns == ("BMC .{0,20} timed out",)
    assert rules[1].type_names == ("ironic.common.exception.IPMIFailure",)
    assert rules[3].statuses == frozenset({503})
    assert rules[3].services == ("inventory-api",)
    assert rules[4].layers == ("db",)
    assert all(rule.linear for rule in rules)
    assert OWNER_RULES_FORMAT_VERSION == 1


@pytest.mark.parametrize(
    ("exc", "service", "layer", "owner"),
    [
        (RuntimeError("BMC 10.0.0.5 has timed out"), None, None, "node"),
        (IPMIFailure("IPMI call failed"), None, None, "node"),
        (IpmiException("session closed"), None, None, "node"),
        (Unavailable("overloaded"), "inventory-api", "api", "provider"),
        (Unavailable("overloaded"), "other-api", "api", "unknown"),
        (OSError(110, "Connection timed out"), "svc", "db", "db"),
        (OSError(110, "Connection timed out"), "svc", "api", "unknown"),
        (subprocess.CalledProcessError(4, ["ansible-playbook"]), None, None, "node"),
        (subprocess.CalledProcessError(3, ["ansible-playbook"]), None, None, "unknown"),
    ],
)
def test_each_kind_of_criterion_classifies_an_exception(
    write_rules: Write, exc: BaseException, service: str | None, layer: str | None, owner: str
) -> None:
    rules = rules_with_defaults(write_rules(GOOD))
    assert classify(exc, rules, service=service, layer=layer) == owner


@pytest.mark.parametrize(
    ("evidence", "match"),
    [
        (
            Evidence(message="power on: BMC 10.0.0.5 has timed out"),
            OwnerMatch("node", "bmc-timeout", "BMC 10.0.0.5 has timed out"),
        ),
        (
            Evidence(type="ironic.common.exception.IPMIFailure", message="IPMI call failed"),
            OwnerMatch("node", "ipmi-failure", "ironic.common.exception.IPMIFailure"),
        ),
        (
            Evidence(type="pyghmi.exceptions.IpmiException", message="session closed"),
            OwnerMatch("node", "pyghmi", "pyghmi.exceptions.IpmiException"),
        ),
        (
            Evidence(message="busy", status=503, service="inventory-api"),
            OwnerMatch("provider", "inventory-overloaded", "HTTP 503", weak=True),
        ),
        (Evidence(message="busy", status=503, service="other-api"), None),
        (
            Evidence(message="read: [Errno 110] Connection timed out", layer="db"),
            OwnerMatch("db", "db-socket-timeout", "[Errno 110]"),
        ),
        (Evidence(message="read: [Errno 110] Connection timed out", layer="api"), None),
        (
            Evidence(message="playbook failed", exit_code=4),
            OwnerMatch("node", "ansible-host-failed", "exit code 4"),
        ),
        (
            Evidence(message='fatal: [n-17]: FAILED! => {"rc": 4}'),
            OwnerMatch("node", "ansible-host-failed", "exit code 4"),
        ),
    ],
)
def test_each_kind_of_criterion_classifies_evidence(
    write_rules: Write, evidence: Evidence, match: OwnerMatch | None
) -> None:
    rules = rules_with_defaults(write_rules(GOOD))
    assert classify_evidence(evidence, rules) == match


CERT_IS_DEPLOY = """\
[[rule]]
name = "our-ca-is-deployed-late"
owner_layer = "deploy"
message = "certificate has expired"
"""


def test_the_files_rules_win_over_the_built_in_table(write_rules: Write) -> None:
    exc = ssl.SSLCertVerificationError("certificate verify failed: certificate has expired")
    evidence = Evidence(type="ssl.SSLCertVerificationError", message=str(exc))
    assert classify(exc) == "cert"
    assert classify_evidence(evidence) == OwnerMatch(
        "cert", "tls-certificate-type", "ssl.SSLCertVerificationError"
    )
    rules = rules_with_defaults(write_rules(CERT_IS_DEPLOY))
    assert rules[1:] == DEFAULT_RULES
    assert classify(exc, rules) == "deploy"
    assert classify_evidence(evidence, rules) == OwnerMatch(
        "deploy", "our-ca-is-deployed-late", "certificate has expired"
    )


def test_no_file_is_the_built_in_table() -> None:
    assert rules_with_defaults(None) is DEFAULT_RULES


def test_a_file_without_rules_adds_none(write_rules: Write) -> None:
    assert load_rules(write_rules("# nothing yet\nversion = 1\n")) == ()
    assert load_rules(write_rules("")) == ()


def test_a_byte_order_mark_is_forgiven(write_rules: Write) -> None:
    rules = load_rules(write_rules(b"\xef\xbb\xbf" + CERT_IS_DEPLOY.encode()))
    assert [rule.name for rule in rules] == ["our-ca-is-deployed-late"]


def test_hostile_patterns_run_in_linear_time(write_rules: Write) -> None:
    # Under Python's re each of these backtracks for longer than the universe is old on this
    # text; RE2 answers in one pass.
    path = write_rules(
        '[[rule]]\nname = "nested"\nowner_layer = "node"\nmessage = "(a+)+$"\n'
        '[[rule]]\nname = "overlapping"\nowner_layer = "db"\nmessage = "(x+x+)+y"\n'
    )
    rules = rules_with_defaults(path)
    assert classify(RuntimeError("a" * 100_000 + "!"), rules) == "unknown"
    assert classify(RuntimeError("x" * 100_000), rules) == "unknown"
    assert classify(RuntimeError("x" * 100_000 + "y"), rules) == "db"
    assert classify(RuntimeError("!" + "a" * 100_000), rules) == "node"
    assert classify_evidence(Evidence(message="x" * 100_000), rules) is None


def test_a_backreference_is_refused(write_rules: Write) -> None:
    path = write_rules(
        '[[rule]]\nname = "doubled"\nowner_layer = "node"\nmessage = ["ok", "(\\\\w+) \\\\1"]\n'
    )
    with pytest.raises(ConfigurationError) as info:
        load_rules(path)
    assert str(info.value) == (
        f"owner rules file {str(path)!r}: rule #1 'doubled' (line 1): key 'message[1]': "
        "RE2 refuses a string ('(\\\\w+) \\\\1'): invalid escape sequence: \\1 (RE2 runs in "
        "linear time: it has no backreferences and no look-around, and limits an "
        "automaton's size)"
    )


RULE = '[[rule]]\nname = "x"\nowner_layer = "node"\n'
RE2_NOTE = (
    " (RE2 runs in linear time: it has no backreferences and no look-around, and limits "
    "an automaton's size)"
)
# A hundred patterns RE2 compiles one by one but not as one alternation (TOML literal strings).
LARGE_PATTERNS = [f"'q{i:03d}\\w{{1000}}'" for i in range(100)]
LAYER_CHOICES = "api, api_auth, cert, db, deploy, ingress, node, provider, workflow_state"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "[[rule]]\nname = 'x'\nowner_layer = \n",
            "is not valid TOML: Invalid value (at line 3, column 15)",
        ),
        (
            RULE + 'message = "a"\n[rule]\n',
            "is not valid TOML: Cannot declare ('rule',) twice (at line 5, column 6)",
        ),
        ("a = " + "[" * 10_000, "is not valid TOML: arrays or tables nest too deeply"),
        (
            "[[rules]]\nname = 'x'\n",
            "key 'rules': unknown top-level key (allowed: rule, version); did you mean 'rule'?",
        ),
        (
            "[rule]\nname = 'x'\n",
            "key 'rule': must be an array of tables: write [[rule]], not [rule]",
        ),
        ("version = 2\n", "key 'version': this library reads version 1, got an integer (2)"),
        ("version = true\n", "key 'version': this library reads version 1, got a boolean (true)"),
        ("rule = [1]\n", "rule #1: must be a table ([[rule]]), got an integer (1)"),
        ("[[rule]]\nowner_layer = 'node'\n", "rule #1 (line 1): key 'name': is required"),
        (
            "[[rule]]\nname = 5\n",
            "rule #1 (line 1): key 'name': expected the rule's name (a string), got an integer (5)",
        ),
        (
            "[[rule]]\nname = ' x'\n",
            "rule #1 (line 1): key 'name': a string (' x') has surrounding spaces or control "
            "characters",
        ),
        (
            "[[rule]]\nname = 'x'\nmessages = ['a']\n",
            "rule #1 'x' (line 1): key 'messages': unknown key (allowed: name, owner_layer, "
            "description, type, module, status, errno, exit_code, message, service, layer); "
            "did you mean 'message'?",
        ),
        (
            "[[rule]]\nname = 'x'\nstatus = 503\n",
            "rule #1 'x' (line 1): key 'owner_layer': is required",
        ),
        (
            "[[rule]]\nname = 'x'\nowner_layer = 'network'\nstatus = 503\n",
            f"rule #1 'x' (line 1): key 'owner_layer': expected one of {LAYER_CHOICES}, "
            "got a string ('network')",
        ),
        (
            "[[rule]]\nname = 'x'\nowner_layer = 'unknown'\nstatus = 503\n",
            f"rule #1 'x' (line 1): key 'owner_layer': expected one of {LAYER_CHOICES}, "
            "got a string ('unknown')",
        ),
        (
            RULE + "service = 'api'\n",
            "rule #1 'x' (line 1): has no criterion on the failure itself (one of type, module, "
            "status, errno, exit_code, message); service and layer only narrow a rule",
        ),
        (
            RULE + "status = 'abc'\n",
            "rule #1 'x' (line 1): key 'status': expected an HTTP status (an integer), "
            "got a string ('abc')",
        ),
        (
            RULE + "status = [502, '503']\n",
            "rule #1 'x' (line 1): key 'status[1]': expected an HTTP status (an integer), "
            "got a string ('503'); write the number without quotes",
        ),
        (
            RULE + "status = 503.0\n",
            "rule #1 'x' (line 1): key 'status': expected an HTTP status (an integer), "
            "got a float (503.0)",
        ),
        (
            RULE + "status = 600\n",
            "rule #1 'x' (line 1): key 'status': expected an HTTP status from 100 to 599, got 600",
        ),
        (
            RULE + "exit_code = true\n",
            "rule #1 'x' (line 1): key 'exit_code': expected a process exit code (an integer), "
            "got a boolean (true)",
        ),
        (
            RULE + "exit_code = [1, 256]\n",
            "rule #1 'x' (line 1): key 'exit_code[1]': expected a process exit code from 0 to "
            "255, got 256",
        ),
        (RULE + "errno = 0\n", "rule #1 'x' (line 1): key 'errno': errno 0 means no error"),
        (
            RULE + "errno = 70000\n",
            "rule #1 'x' (line 1): key 'errno': expected an errno value from -4095 to 65535, "
            "got 70000",
        ),
        (
            RULE + "errno = 1979-05-27\n",
            "rule #1 'x' (line 1): key 'errno': expected an errno value (an integer), got a date",
        ),
        (
            RULE + "type = []\n",
            "rule #1 'x' (line 1): key 'type': is an empty array, which matches nothing; leave "
            "the key out",
        ),
        (
            RULE + "type = 'IPMIFailure '\n",
            "rule #1 'x' (line 1): key 'type': a string ('IPMIFailure ') has surrounding spaces "
            "or control characters",
        ),
        (
            RULE + "module = 'pyghmi.'\n",
            "rule #1 'x' (line 1): key 'module': 'pyghmi.' is not a package name: write it "
            "without the dots at its ends",
        ),
        (
            RULE + "status = 503\nlayer = ['node', 'network']\n",
            "rule #1 'x' (line 1): key 'layer[1]': expected one of api, db, ingress, node, "
            "projection, provider, workflow, got a string ('network')",
        ),
        (
            RULE + "status = 503\nservice = ''\n",
            "rule #1 'x' (line 1): key 'service': expected a service name, got an empty string",
        ),
        (
            RULE + "status = 503\ndescription = 5\n",
            "rule #1 'x' (line 1): key 'description': expected a string, got an integer (5)",
        ),
        (
            RULE + "message = '(?=BMC)timed out'\n",
            "rule #1 'x' (line 1): key 'message': RE2 refuses a string ('(?=BMC)timed out'): "
            f"invalid perl operator: (?={RE2_NOTE}",
        ),
        (
            RULE + "message = '\\pL{1000}'\n",
            "rule #1 'x' (line 1): key 'message': RE2 refuses a string ('\\\\pL{1000}'): "
            f"pattern too large - compile failed{RE2_NOTE}",
        ),
        (
            RULE + "message = 'a{1001}'\n",
            "rule #1 'x' (line 1): key 'message': RE2 refuses a string ('a{1001}'): "
            f"invalid repetition size: {{1001}}{RE2_NOTE}",
        ),
        (
            RULE + "message = 5\n",
            "rule #1 'x' (line 1): key 'message': expected a regular expression (a string), "
            "got an integer (5)",
        ),
        (
            RULE + "status = {code = 503}\n",
            "rule #1 'x' (line 1): key 'status': expected an HTTP status (an integer), got a table",
        ),
        (
            f"[[rule]]\nname = '{'n' * 101}'\n",
            "rule #1 (line 1): key 'name': is 101 characters long; the limit is 100",
        ),
        (
            RULE + f"status = 503\ndescription = '{'d' * 2001}'\n",
            "rule #1 'x' (line 1): key 'description': is 2001 characters long; the limit is 2000",
        ),
        (
            RULE + "message = ''\n",
            "rule #1 'x' (line 1): key 'message': is an empty pattern, which matches every message",
        ),
        (
            RULE + "message = ['BMC', 'timed out|']\n",
            "rule #1 'x' (line 1): key 'message[1]': a string ('timed out|') matches an empty "
            "message, so it would match every failure",
        ),
        (
            RULE + f"message = '{'a' * 1001}'\n",
            "rule #1 'x' (line 1): key 'message': is 1001 characters long; the limit is 1000",
        ),
        (
            RULE + f"message = [{', '.join(repr(str(i)) for i in range(101))}]\n",
            "rule #1 'x' (line 1): key 'message': lists 101 values; the limit is 100",
        ),
        (
            RULE + f"message = [{', '.join(LARGE_PATTERNS)}]\n",
            "rule #1 'x' (line 1): key 'message': RE2 refuses the 100 patterns together: "
            "pattern too large - compile failed (each compiles alone; split them over several "
            "rules)",
        ),
        (
            RULE + "status = 502\n\n" + RULE + "status = 504\n",
            "rule #2 'x' (line 6): key 'name': rule #1 has the same name; names must be unique",
        ),
        (
            "rule = [{name = 'a', owner_layer = 'db', status = 'x'}]\n",
            "rule #1 'a': key 'status': expected an HTTP status (an integer), got a string ('x')",
        ),
        (
            "".join(
                f"[[rule]]\nname = 'r{i}'\nowner_layer = 'db'\nstatus = 500\n" for i in range(1001)
            ),
            "key 'rule': 1001 rules; the limit is 1000",
        ),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_the_rule_and_the_key(
    write_rules: Write, text: str, problem: str
) -> None:
    path = write_rules(text)
    with pytest.raises(ConfigurationError) as info:
        load_rules(path)
    assert str(info.value) == f"owner rules file {str(path)!r}: {problem}"


def test_an_integer_too_long_for_python_is_refused_as_toml(write_rules: Write) -> None:
    path = write_rules(RULE + f"status = {'9' * 5000}\n")
    with pytest.raises(ConfigurationError) as info:
        load_rules(path)
    assert str(info.value).startswith(f"owner rules file {str(path)!r}: is not valid TOML: ")
    assert "4300 digits" in str(info.value)


def test_a_file_that_is_not_utf8_is_refused(write_rules: Write) -> None:
    path = write_rules(b'[[rule]]\nname = "caf\xe9"\n')
    with pytest.raises(ConfigurationError) as info:
        load_rules(path)
    assert str(info.value) == (
        f"owner rules file {str(path)!r}: is not UTF-8 text (line 2, byte 20); TOML files are UTF-8"
    )


def test_a_file_too_big_is_refused(write_rules: Write) -> None:
    path = write_rules("#" * (1 << 20) + "\n")
    with pytest.raises(ConfigurationError) as info:
        load_rules(path)
    assert str(info.value) == (
        f"owner rules file {str(path)!r}: is 1048577 bytes; the limit is 1048576"
    )


def test_a_file_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    with pytest.raises(ConfigurationError) as info:
        load_rules(missing)
    assert str(info.value) == (
        f"owner rules file {str(missing)!r}: cannot be read: No such file or directory"
    )
    with pytest.raises(ConfigurationError) as info:
        load_rules(tmp_path)
    assert str(info.value) == f"owner rules file {str(tmp_path)!r}: is not a regular file"


# The library, configured with a rules file.

SITE_RULES = """\
[[rule]]
name = "pdu-outlet-off"
owner_layer = "node"
message = "PDU outlet .{0,10} is off"

[[rule]]
name = "conductor-reservation"
owner_layer = "workflow_state"
message = "reservation .{1,40} held by"
service = "ironic-conductor"
layer = "node"
"""


def _log_failure(message: str) -> None:
    log = agent_logging.get_logger("tasks")
    try:
        raise RuntimeError("task failed") from RuntimeError(message)
    except RuntimeError:
        log.exception("task failed")


def test_configure_reads_the_file_named_by_the_variable(
    write_rules: Write, captured: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_rules(SITE_RULES)
    monkeypatch.setenv("AGENT_LOGGING_OWNER_RULES", str(path))
    sink = captured(service="ironic-conductor", layer="node")
    _log_failure("PDU outlet A7 is off")
    _log_failure("reservation r-17 held by conductor-2")
    first, second = sink.records
    assert first["error"]["owner_layer"] == "node"
    assert first["error"]["chain"][1]["message"] == "PDU outlet A7 is off"
    assert second["error"]["owner_layer"] == "workflow_state"
    # Neither is in the built-in table.
    assert classify(RuntimeError("PDU outlet A7 is off")) == "unknown"
    assert classify(RuntimeError("reservation r-17 held by conductor-2")) == "unknown"


@pytest.mark.parametrize(
    ("service", "layer", "owners"),
    [
        ("ironic-conductor", "node", ["workflow_state", "node"]),
        ("inventory-api", "node", ["unknown", "node"]),
        ("ironic-conductor", "api", ["unknown", "node"]),
    ],
)
def test_rules_that_name_a_service_and_layer_apply_to_those_only(
    write_rules: Write, captured: Capture, service: str, layer: str, owners: list[str]
) -> None:
    sink = captured(service=service, layer=layer, owner_rules=write_rules(SITE_RULES))
    _log_failure("reservation r-17 held by conductor-2")
    _log_failure("PDU outlet A7 is off")
    assert [r["error"]["owner_layer"] for r in sink.records] == owners


def test_the_argument_wins_over_the_variable_and_reconfiguring_drops_the_file(
    write_rules: Write, captured: Capture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENT_LOGGING_OWNER_RULES", str(tmp_path / "missing.toml"))
    path = write_rules(SITE_RULES)
    sink = captured(owner_rules=str(path))
    _log_failure("PDU outlet A7 is off")
    assert sink.last()["error"]["owner_layer"] == "node"
    assert _state.owner_rules[0].name == "pdu-outlet-off"
    monkeypatch.delenv("AGENT_LOGGING_OWNER_RULES")
    sink = captured()
    _log_failure("PDU outlet A7 is off")
    assert sink.last()["error"]["owner_layer"] == "unknown"
    assert _state.owner_rules is DEFAULT_RULES
    captured(owner_rules=path)
    agent_logging.shutdown()
    assert _state.owner_rules is DEFAULT_RULES


def test_configure_refuses_a_bad_file_at_start_and_keeps_the_pipeline_in_force(
    write_rules: Write, captured: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = captured()
    path = write_rules(RULE + "status = 'abc'\n")
    monkeypatch.setenv("AGENT_LOGGING_OWNER_RULES", str(path))
    with pytest.raises(ConfigurationError) as info:
        agent_logging.configure(service="svc", layer="api", output="none")
    assert str(info.value) == (
        f"AGENT_LOGGING_OWNER_RULES / owner_rules: owner rules file {str(path)!r}: rule #1 'x' "
        "(line 1): key 'status': expected an HTTP status (an integer), got a string ('abc')"
    )
    agent_logging.get_logger().info("still here")
    assert sink.last()["event"] == "still here"


def test_configure_refuses_an_owner_rules_value_that_is_no_path() -> None:
    with pytest.raises(ConfigurationError, match=r"owner_rules: expected a path, got 5"):
        agent_logging.configure(service="svc", layer="api", output="none", owner_rules=5)


# Properties: whatever the file says, the answer is rules or a ConfigurationError.

_FRAGMENTS = st.sampled_from(
    [
        "[[rule]]\n",
        "[rule]\n",
        "version = 1\n",
        'name = "a"\n',
        'name = "b"\n',
        'owner_layer = "db"\n',
        'owner_layer = "nope"\n',
        "status = 503\n",
        "status = [503, 'x']\n",
        "errno = -2\n",
        "exit_code = 1e3\n",
        'message = "(a)\\\\1"\n',
        'message = ["BMC .{0,20} timed out", "(x+x+)+y"]\n',
        "layer = 'node'\n",
        "x = [\n",
        "]\n",
        '"',
        "'''\n",
        "= ",
        "\x00",
        "\ufeff",
        "#",
    ]
)

_SCALARS = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-100_000, max_value=100_000),
    st.booleans(),
    st.floats(),
    st.sampled_from(
        ["node", "db", "503", "pyghmi", "(a)\\1", "(a+)+$", "x|", "", "BMC .{0,20} timed out"]
    ),
)
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=4))
_KEYS = st.sampled_from(
    [
        "name",
        "owner_layer",
        "description",
        "type",
        "module",
        "status",
        "errno",
        "exit_code",
        "message",
        "service",
        "layer",
        "messages",
        "Name",
    ]
)
_RULES = st.one_of(
    st.dictionaries(_KEYS, _VALUES, max_size=8),
    st.fixed_dictionaries(
        {
            "name": st.text(min_size=1, max_size=8),
            "owner_layer": st.sampled_from(["node", "db", "cert", "unknown"]),
        },
        optional={
            "status": _VALUES,
            "errno": _VALUES,
            "exit_code": _VALUES,
            "message": _VALUES,
            "type": _VALUES,
            "layer": _VALUES,
        },
    ),
)


def _toml(value: object) -> str:
    """``value`` as TOML (basic strings, inline arrays and tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        escaped = "".join(
            f"\\u{ord(c):04x}" if c in '"\\' or ord(c) < 0x20 or ord(c) == 0x7F else c
            for c in value
        )
        return f'"{escaped}"'
    if isinstance(value, list):
        return f"[{', '.join(_toml(item) for item in value)}]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in value.items()) + "}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("owner-rules") / "rules.toml"


def _rules_or_refusal(path: Path) -> tuple[OwnerRule, ...] | None:
    """The file's rules, or None when it is refused (with a message naming it)."""
    refusal: ConfigurationError | None = None
    try:
        rules = load_rules(path)
    except ConfigurationError as exc:
        refusal = exc
    if refusal is None:
        return rules
    assert str(refusal).startswith(f"owner rules file {str(path)!r}: ")
    return None


@settings(max_examples=300, deadline=None)
@given(text=st.lists(_FRAGMENTS, max_size=30).map("".join))
def test_toml_ish_text_gives_rules_or_a_configuration_error(scratch: Path, text: str) -> None:
    scratch.write_text(text, encoding="utf-8")
    rules = _rules_or_refusal(scratch)
    assert rules is None or all(isinstance(rule, OwnerRule) for rule in rules)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_give_rules_or_a_configuration_error(scratch: Path, data: bytes) -> None:
    scratch.write_bytes(data)
    _rules_or_refusal(scratch)


@settings(max_examples=300, deadline=None)
@given(tables=st.lists(_RULES, max_size=4))
def test_any_rule_tables_give_rules_or_a_configuration_error(
    scratch: Path, tables: list[dict[str, object]]
) -> None:
    scratch.write_text(
        "".join(
            "[[rule]]\n" + "".join(f"{_toml(k)} = {_toml(v)}\n" for k, v in table.items())
            for table in tables
        ),
        encoding="utf-8",
    )
    rules = _rules_or_refusal(scratch)
    if rules is not None:
        assert len(rules) == len(tables)
        assert [rule.name for rule in rules] == [table["name"] for table in tables]
