"""collector-config/: the OpenTelemetry Collector, Alloy and Loki configs parse, keep their
durability settings (checkpoints, persistent queue, WAL, retries that never give up), label
with exactly ``service_name``, ``layer`` and ``env``, and agree with each other.

The collectors' own binaries are not installable here (not on PyPI, npm or Debian); the tests
at the end run them when they happen to be on PATH. Loki's (``../shared/bin/loki``) is: the
tests at the end verify the Loki config with it and run it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from agent_logging.schema import IDENTIFIER_KEYS, METADATA_KEYS, STREAM_LABELS
from tests.collector_config.alloy_syntax import Block, Call, Concat, Ref, evaluate
from tests.collector_config.configs import (
    ALLOY,
    LABELS,
    LOKI,
    NO_ENV,
    OTEL_ENV_REFERENCE,
    OTELCOL,
    README,
    RESOURCE_LABELS,
    alloy,
    components,
    loki,
    operators,
    otelcol,
)
from tests.lokisim.fixtures import VISIBILITY_TIMEOUT_S
from tests.real_parts import not_available, running_loki

# ---- OpenTelemetry Collector ---------------------------------------------------------------


def test_otelcol_config_declares_one_pipeline_from_four_tails_to_loki() -> None:
    config = otelcol()
    assert set(config["receivers"]) == {
        "filelog/agent",
        "filelog/nginx_access",
        "filelog/nginx_error",
        "filelog/postgres",
    }
    assert set(config["exporters"]) == {"otlphttp/loki"}
    assert set(config["service"]["pipelines"]) == {"logs"}


def test_every_component_a_pipeline_names_is_declared_and_every_declared_one_is_used() -> None:
    config = otelcol()
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set()}
    for pipeline in config["service"]["pipelines"].values():
        for section, names in used.items():
            names.update(pipeline.get(section, []))
    for section, names in used.items():
        assert names == set(config[section]), section
    assert set(config["service"]["extensions"]) == set(config["extensions"])


@pytest.mark.parametrize(
    "receiver", ["filelog/agent", "filelog/nginx_access", "filelog/nginx_error", "filelog/postgres"]
)
def test_filelog_receivers_checkpoint_to_the_file_storage_extension_and_never_drop(
    receiver: str,
) -> None:
    config = otelcol()
    settings_ = config["receivers"][receiver]
    storage = settings_["storage"]
    assert storage.split("/")[0] == "file_storage"
    assert storage in config["extensions"] and storage in config["service"]["extensions"]
    assert settings_["start_at"] == "beginning"
    assert settings_["retry_on_failure"]["enabled"] is True
    assert settings_["retry_on_failure"]["max_elapsed_time"] == 0


def test_exporter_queue_is_persisted_on_the_same_storage_and_retries_forever() -> None:
    config = otelcol()
    exporter = config["exporters"]["otlphttp/loki"]
    storages = {r["storage"] for r in config["receivers"].values()}
    assert exporter["sending_queue"]["enabled"] is True
    assert {exporter["sending_queue"]["storage"]} == storages == {"file_storage"}
    assert exporter["sending_queue"]["block_on_overflow"] is True
    assert exporter["retry_on_failure"]["enabled"] is True
    assert exporter["retry_on_failure"]["max_elapsed_time"] == 0
    # otlphttp appends /v1/logs to `endpoint`: Loki's OTLP ingestion path.
    assert exporter["endpoint"] + "/v1/logs" == "http://127.0.0.1:3100/otlp/v1/logs"


def test_file_storage_has_a_directory_and_fsyncs() -> None:
    storage = otelcol()["extensions"]["file_storage"]
    assert storage["directory"] == "/var/lib/otelcol/evidence"
    assert storage["create_directory"] is True
    assert storage["fsync"] is True


def test_every_environment_reference_has_a_default() -> None:
    text = OTELCOL.read_text()
    references = re.findall(r"\$\{[^}]*\}", text)
    assert references
    for reference in references:
        match = OTEL_ENV_REFERENCE.fullmatch(reference)
        assert match is not None and match.group(2), reference


def test_batches_stay_under_lokis_request_size_limit() -> None:
    batch = otelcol()["processors"]["batch"]
    max_line_bytes = 256 * 1024  # Loki's default max_line_size
    assert batch["send_batch_max_size"] * max_line_bytes <= 100 * 1024 * 1024


@pytest.mark.parametrize(
    "receiver", ["filelog/agent", "filelog/nginx_access", "filelog/nginx_error", "filelog/postgres"]
)
def test_resource_attributes_are_exactly_the_three_labels(receiver: str) -> None:
    settings_ = otelcol()["receivers"][receiver]
    static = set(settings_.get("resource") or {})
    targets = [op.get("to") or op.get("field") or "" for op in settings_["operators"]]
    moved = {
        target.removeprefix("resource.").removeprefix('resource["').removesuffix('"]')
        for target in targets
        if target.startswith("resource")
    }
    assert static | moved == RESOURCE_LABELS


def test_retain_keeps_only_identifiers_level_and_file_name() -> None:
    allowed = {f"attributes.{key}" for key in IDENTIFIER_KEYS} | {
        "attributes.level",
        'attributes["log.file.name"]',
    }
    for name, settings_ in otelcol()["receivers"].items():
        retains = [op for op in settings_["operators"] if op["type"] == "retain"]
        assert len(retains) == 1 and settings_["operators"][-1] is retains[0], name
        fields = set(retains[0]["fields"])
        assert fields <= allowed, name
        if name != "filelog/nginx_error":  # an error line names no request
            assert fields == allowed, name


def test_agent_records_parse_ts_as_rfc3339_nanoseconds_and_level_as_severity() -> None:
    parser = operators("filelog/agent")[0]
    assert parser["type"] == "json_parser"
    assert parser["timestamp"] == {
        "parse_from": "attributes.ts",
        "layout_type": "gotime",
        "layout": "2006-01-02T15:04:05.999999999Z07:00",  # Go's time.RFC3339Nano
    }
    assert parser["severity"]["parse_from"] == "attributes.level"
    assert parser["trace"] == {
        "trace_id": {"parse_from": "attributes.trace_id"},
        "span_id": {"parse_from": "attributes.span_id"},
    }


# ---- Alloy ---------------------------------------------------------------------------------


def test_alloy_components_are_wired_to_declared_exports() -> None:
    root = alloy()
    declared = {f"{block.name}.{block.label}" for block in root.blocks}
    exports = {"local.file_match": "targets", "loki.process": "receiver", "loki.write": "receiver"}
    sources = components("loki.source.file")
    assert set(sources) == {"agent", "nginx_access", "nginx_error", "postgres"}
    used: set[str] = set()
    for label, source in sources.items():
        targets = source.attributes["targets"]
        assert targets == Ref(f"local.file_match.{label}.targets")
        forward = source.attributes["forward_to"]
        assert forward == [Ref(f"loki.process.{label}.receiver")]
        used |= {f"local.file_match.{label}", f"loki.process.{label}"}
    for process in components("loki.process").values():
        assert process.attributes["forward_to"] == [Ref("loki.write.loki.receiver")]
    used.add("loki.write.loki")
    assert used | {f"loki.source.file.{label}" for label in sources} == declared
    for ref in _refs(root):
        component, _, export = ref.path.rpartition(".")
        assert component in declared and exports[component.rsplit(".", 1)[0]] == export, ref


def _refs(value: Any) -> list[Ref]:
    if isinstance(value, Ref):
        return [value]
    if isinstance(value, Block):
        return [r for v in value.attributes.values() for r in _refs(v)] + [
            r for b in value.blocks for r in _refs(b)
        ]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    if isinstance(value, dict):
        return [r for v in value.values() for r in _refs(v)]
    if isinstance(value, Call | Concat):
        parts = value.args if isinstance(value, Call) else value.parts
        return [r for v in parts for r in _refs(v)]
    return []


def test_alloy_loki_write_has_its_wal_and_never_gives_up() -> None:
    write = components("loki.write")["loki"]
    wal = write.child("wal")
    assert wal.attributes["enabled"] is True
    assert wal.attributes["max_segment_age"] == "168h"  # Loki's reject_old_samples_max_age
    endpoint = write.child("endpoint")
    assert endpoint.attributes["max_backoff_retries"] == 0  # 0: retry forever
    assert endpoint.attributes["retry_on_http_429"] is True
    assert evaluate(endpoint.attributes["url"], NO_ENV) == "http://127.0.0.1:3100/loki/api/v1/push"
    assert (
        evaluate(endpoint.attributes["url"], {"LOKI_PUSH_URL": "http://l:3100/x"})
        == "http://l:3100/x"
    )


@pytest.mark.parametrize("process", ["agent", "nginx_access", "nginx_error", "postgres"])
def test_alloy_pipelines_end_with_exactly_the_three_labels(process: str) -> None:
    block = components("loki.process")[process]
    produced: set[str] = set()
    for stage in block.children("stage.static_labels") + block.children("stage.labels"):
        values = stage.attributes["values"]
        assert isinstance(values, dict)
        produced |= set(values)
    assert produced == LABELS
    keep = block.blocks[-1]
    assert keep.name == "stage.label_keep"
    assert keep.attributes["values"] == list(STREAM_LABELS)
    assert not any(stage.attributes.get("labels_from_groups") for stage in block.blocks)


@pytest.mark.parametrize("process", ["agent", "nginx_access", "postgres"])
def test_alloy_structured_metadata_carries_every_identifier(process: str) -> None:
    stages = components("loki.process")[process].children("stage.structured_metadata")
    assert len(stages) == 1
    values = stages[0].attributes["values"]
    assert isinstance(values, dict)
    assert set(values) == set(METADATA_KEYS) | {"filename"}  # the schema's, and the file


def test_alloy_file_targets_default_to_the_documented_paths() -> None:
    paths: dict[str, Any] = {
        label: evaluate(block.attributes["path_targets"], NO_ENV)
        for label, block in components("local.file_match").items()
    }
    assert paths == {
        "agent": [{"__path__": "/var/log/evidence/*.jsonl"}],
        "nginx_access": [{"__path__": "/var/log/nginx/access.log"}],
        "nginx_error": [{"__path__": "/var/log/nginx/error.log"}],
        "postgres": [{"__path__": "/var/lib/postgresql/data/log/*.json"}],
    }
    otel_includes = {
        name: settings_["include"][0] for name, settings_ in otelcol()["receivers"].items()
    }
    assert otel_includes == {
        f"filelog/{label}": targets[0]["__path__"] for label, targets in paths.items()
    }


# ---- Loki ----------------------------------------------------------------------------------


def test_loki_local_is_single_tenant_on_loopback_with_structured_metadata() -> None:
    config = loki()
    assert config["auth_enabled"] is False
    assert config["server"]["http_listen_address"] == "127.0.0.1"
    assert config["server"]["grpc_listen_address"] == "127.0.0.1"
    assert config["server"]["http_listen_port"] == 3100
    assert config["common"]["instance_addr"] == "127.0.0.1"
    assert config["common"]["ring"]["kvstore"]["store"] == "inmemory"
    limits = config["limits_config"]
    assert limits["allow_structured_metadata"] is True
    assert limits["volume_enabled"] is True
    [schema] = config["schema_config"]["configs"]
    assert (schema["store"], schema["schema"], schema["object_store"]) == (
        "tsdb",
        "v13",
        "filesystem",
    )
    assert config["analytics"]["reporting_enabled"] is False


def test_loki_local_keeps_everything_under_its_data_dir() -> None:
    config = loki()
    paths = [
        config["common"]["path_prefix"],
        config["common"]["storage"]["filesystem"]["chunks_directory"],
        config["common"]["storage"]["filesystem"]["rules_directory"],
        config["storage_config"]["tsdb_shipper"]["active_index_directory"],
        config["storage_config"]["tsdb_shipper"]["cache_location"],
        config["ingester"]["wal"]["dir"],
        config["compactor"]["working_directory"],
    ]
    assert all(path.startswith("/var/lib/loki") for path in paths), paths
    settings_lines = [
        line for line in LOKI.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    assert sum(line.count("${LOKI_DATA_DIR:-/var/lib/loki}") for line in settings_lines) == len(
        paths
    )
    assert config["ingester"]["wal"]["enabled"] is True
    assert config["compactor"]["retention_enabled"] is True
    assert config["compactor"]["delete_request_store"] == "filesystem"


def test_loki_indexes_exactly_the_collectors_labels_from_otlp() -> None:
    otlp = loki()["limits_config"]["otlp_config"]["resource_attributes"]
    assert otlp["ignore_defaults"] is True
    [rule] = otlp["attributes_config"]
    assert rule["action"] == "index_label"
    assert set(rule["attributes"]) == RESOURCE_LABELS
    # Loki's OTLP translation turns dots into underscores: the Alloy labels, the library's.
    assert {name.replace(".", "_") for name in rule["attributes"]} == LABELS


def test_loki_accepts_backlogs_the_collectors_replay() -> None:
    limits = loki()["limits_config"]
    wal_age = components("loki.write")["loki"].child("wal").attributes["max_segment_age"]
    assert limits["reject_old_samples_max_age"] == wal_age == "168h"


# ---- README --------------------------------------------------------------------------------


def test_readme_log_format_is_json_with_every_field_the_collectors_read() -> None:
    block = re.search(r"```nginx\n(.*?)```", README.read_text(), re.S)
    assert block is not None
    statement = re.search(r"log_format evidence escape=json\s+(.*?);", block.group(1), re.S)
    assert statement is not None
    template = "".join(re.findall(r"'([^']*)'", statement.group(1)))
    sample = orjson.loads(re.sub(r"\$[a-z_0-9]+", "v", template))
    access = operators("filelog/nginx_access")
    read_by_otel = {
        op[key].removeprefix("attributes.")
        for op in access
        if op["type"] in ("regex_parser", "regex_replace")
        for key in ("parse_from", "field")
        if key in op
    } | {
        access[0][key]["parse_from"].removeprefix("attributes.")
        for key in ("timestamp", "severity")
    }
    json_stage = components("loki.process")["nginx_access"].child("stage.json")
    read_by_alloy = set(json_stage.attributes["expressions"])  # type: ignore[arg-type]
    assert read_by_otel <= set(sample) and read_by_alloy <= set(sample)
    assert read_by_otel == read_by_alloy


# ---- the real binaries -----------------------------------------------------------------------
#
# Loki is always at hand (../shared/bin/loki, v3.7.6; tests.real_parts): its tests run
# everywhere, and fail in CI when it is missing. The two collectors are NOT AVAILABLE ON THIS
# MACHINE (tests.real_parts.NOT_AVAILABLE: prebuilt downloads only, not on PyPI, npm or Debian):
# their tests skip, in CI too, unless a binary is put on PATH.


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.integration
def test_otelcol_contrib_validates_the_config() -> None:
    if shutil.which("otelcol-contrib") is None:
        not_available("otelcol-contrib")
    done = _run(["otelcol-contrib", "validate", f"--config={OTELCOL}"])
    assert done.returncode == 0, done.stderr


@pytest.mark.integration
def test_alloy_formats_the_config() -> None:
    if shutil.which("alloy") is None:
        not_available("alloy")
    done = _run(["alloy", "fmt", str(ALLOY)])
    assert done.returncode == 0, done.stderr


@pytest.mark.integration
def test_loki_verifies_the_config(loki_binary: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(loki_binary), f"-config.file={LOKI}", "-config.expand-env=true", "-verify-config"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "LOKI_DATA_DIR": str(tmp_path)},
    )
    # Loki expands ${...} everywhere in the file, comments included, before parsing the YAML.
    assert done.returncode == 0, done.stdout + done.stderr


def _otlp_logs(service: str, allocation: str, ts_ns: int) -> dict[str, Any]:
    """An OTLP/JSON export request as the collector sends it: one record, resource attributes
    for the labels plus one Loki indexes by default (``service.instance.id``)."""

    def attributes(values: dict[str, str]) -> list[dict[str, Any]]:
        return [{"key": k, "value": {"stringValue": v}} for k, v in values.items()]

    resource = {"service.name": service, "layer": "api", "env": "it", "service.instance.id": "i-1"}
    record = {
        "timeUnixNano": str(ts_ns),
        "severityText": "INFO",
        "body": {"stringValue": f'{{"event":"claimed","allocation_id":"{allocation}"}}'},
        "attributes": attributes({"allocation_id": allocation}),
    }
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": attributes(resource)},
                "scopeLogs": [{"scope": {"name": "filelog"}, "logRecords": [record]}],
            }
        ]
    }


@pytest.mark.integration
@pytest.mark.slow
def test_the_local_loki_indexes_only_the_three_labels_from_otlp(
    loki_binary: Path, tmp_path: Path
) -> None:
    # A Loki of its own, not the run's stock one: what is under test is this config (its OTLP
    # label rules and raised ingestion limits), which the stock config does not have.
    data = tmp_path / "loki"
    with running_loki(loki_binary, LOKI, data, env={"LOKI_DATA_DIR": str(data)}) as url:
        service, allocation = f"otlp-{uuid.uuid4().hex[:10]}", f"a-{uuid.uuid4().hex[:8]}"
        start_ns = time.time_ns()
        pushed = httpx.post(
            f"{url}/otlp/v1/logs", json=_otlp_logs(service, allocation, start_ns), timeout=10.0
        )
        assert pushed.status_code in (200, 204), pushed.text
        params = {
            "query": f'{{service_name="{service}"}} | allocation_id="{allocation}"',
            "start": str(start_ns - 1),
            "end": str(time.time_ns() + 1),
        }
        headers = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
        deadline = time.monotonic() + VISIBILITY_TIMEOUT_S
        while True:
            answer = httpx.get(
                f"{url}/loki/api/v1/query_range", params=params, headers=headers, timeout=10.0
            )
            assert answer.status_code == 200, answer.text
            streams = answer.json()["data"]["result"]
            if streams or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # an acknowledged push may take a moment to become queryable
    [stream] = streams
    assert stream["stream"] == {"service_name": service, "layer": "api", "env": "it"}
    [(_ts, _line, categories)] = stream["values"]
    metadata = categories["structuredMetadata"]
    assert metadata["allocation_id"] == allocation
    assert metadata["service_instance_id"] == "i-1"
