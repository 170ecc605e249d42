from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import agent_logging
from agent_logging.errors import InvalidIdentifierError


def test_bind_and_bound_nest_and_restore() -> None:
    agent_logging.bind(node_id="n-17", node_instance_id="ni-3")
    with agent_logging.bound(allocation_id="a-9", workflow_id="wf-2") as inside:
        assert dict(inside) == {
            "node_id": "n-17",
            "node_instance_id": "ni-3",
            "allocation_id": "a-9",
            "workflow_id": "wf-2",
        }
        with agent_logging.bound(allocation_id="a-10"):
            assert agent_logging.current_ids()["allocation_id"] == "a-10"
        assert agent_logging.current_ids()["allocation_id"] == "a-9"
    assert agent_logging.current_ids() == {"node_id": "n-17", "node_instance_id": "ni-3"}


def test_none_unbinds_and_unbind_removes() -> None:
    agent_logging.bind(node_id="n-1", workflow_id="wf-1")
    agent_logging.bind(workflow_id=None)
    assert agent_logging.current_ids() == {"node_id": "n-1"}
    agent_logging.unbind("node_id", "not-bound")
    assert agent_logging.current_ids() == {}


def test_a_bad_value_binds_nothing() -> None:
    agent_logging.bind(node_id="n-1")
    with pytest.raises(InvalidIdentifierError, match="allocation_id"):
        agent_logging.bind(workflow_id="wf-1", allocation_id="a 9")
    assert agent_logging.current_ids() == {"node_id": "n-1"}


def test_asyncio_tasks_inherit_and_do_not_leak() -> None:
    async def handle(n: int) -> tuple[str, str]:
        with agent_logging.bound(allocation_id=f"a-{n}"):
            await asyncio.sleep(0)
            inner = await asyncio.create_task(read())
            return f"a-{n}", inner

    async def read() -> str:
        await asyncio.sleep(0)
        return agent_logging.current_ids()["allocation_id"]

    async def main() -> list[tuple[str, str]]:
        return await asyncio.gather(*(handle(n) for n in range(50)))

    for expected, seen in asyncio.run(main()):
        assert seen == expected


def test_plain_threads_start_empty_but_carry_context_keeps_ids() -> None:
    seen: dict[str, dict[str, str]] = {}

    def look(name: str) -> None:
        seen[name] = agent_logging.current_ids()

    with agent_logging.bound(allocation_id="a-9"):
        plain = threading.Thread(target=look, args=("plain",))
        carried = threading.Thread(target=agent_logging.carry_context(look), args=("carried",))
        plain.start()
        carried.start()
    plain.join(5)
    carried.join(5)
    assert seen == {"plain": {}, "carried": {"allocation_id": "a-9"}}


def test_executors_carry_the_submitters_context() -> None:
    def read() -> dict[str, str]:
        return agent_logging.current_ids()

    with agent_logging.ContextThreadPoolExecutor(max_workers=2) as pool:
        futures = []
        for n in range(20):
            with agent_logging.bound(workflow_id=f"wf-{n}"):
                futures.append((n, pool.submit(read)))
        for n, future in futures:
            assert future.result(timeout=5) == {"workflow_id": f"wf-{n}"}

    async def via_loop() -> dict[str, str]:
        loop = asyncio.get_running_loop()
        with agent_logging.bound(workflow_id="wf-loop"), ThreadPoolExecutor(1) as pool:
            return await loop.run_in_executor(pool, agent_logging.carry_context(read))

    assert asyncio.run(via_loop()) == {"workflow_id": "wf-loop"}
