from __future__ import annotations

import subprocess
import sys

import pytest

import agent_logging

STABLE = {
    "bind",
    "bound",
    "configure",
    "current_ids",
    "env",
    "get_logger",
    "headers",
    "ids_from_headers",
    "shutdown",
    "sql_comment",
}


def test_all_is_sorted_complete_and_keeps_the_stable_names() -> None:
    def isort_style(name: str) -> tuple[int, str]:  # ruff RUF022: CONSTANTS, Classes, functions
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert agent_logging.__all__ == sorted(agent_logging.__all__, key=isort_style)
    assert set(agent_logging.__all__) >= STABLE
    for name in agent_logging.__all__:
        assert hasattr(agent_logging, name), name


@pytest.mark.integration
def test_importing_the_library_pays_for_no_web_framework_or_database() -> None:
    code = (
        "import sys, agent_logging;"
        "agent_logging.configure(service='s', layer='node', output='none');"
        "agent_logging.get_logger().info('x');"
        "heavy = sorted(m for m in ('fastapi', 'starlette', 'duckdb', 'uvicorn', 'correlator',"
        " 'requests', 'opentelemetry.sdk') if m in sys.modules);"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.integration
def test_the_library_works_without_opentelemetry() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None;"
        "import io, agent_logging; buf = io.BytesIO();"
        "agent_logging.configure(service='s', layer='node', output=buf);"
        "agent_logging.bind(node_id='n-1'); agent_logging.get_logger().info('x');"
        "print(buf.getvalue().decode().strip())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert '"node_id":"n-1"' in out.stdout
