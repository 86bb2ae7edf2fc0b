"""`DockerRun.wait` asked from several threads at once (the runner and the heat guard do) never fails."""

from __future__ import annotations

import threading
import time

from harness.engines.dockerrun import DockerRun


class SlowExit:
    """A container whose `wait` answers after a moment, as Docker's does; only `id` and `wait` are used."""

    id = "0123456789abcdef"

    def wait(self) -> dict:
        time.sleep(0.02)
        return {"StatusCode": 3}


def test_many_threads_asking_wait_at_once_all_get_the_exit_code_and_none_raises() -> None:
    problems: list[BaseException] = []
    codes: list[int] = []
    for _ in range(50):  # the race needs a thread to join the waiter in the moment before it is started
        run = DockerRun(client=None, container=SlowExit())
        start = threading.Barrier(4)

        def ask() -> None:
            start.wait()
            try:
                run.wait(0)
                codes.append(run.wait(5))
            except BaseException as err:  # noqa: BLE001 - collected for the assertion
                problems.append(err)

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert problems == []
    assert set(codes) == {3} and len(codes) == 200
