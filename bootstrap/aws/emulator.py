"""The embedded AWS emulator for the `local` target: a moto server on a free loopback port.

It speaks the AWS wire protocol, so the same boto3 and Pulumi provider code runs against it as
against AWS. It is started in-process for the life of one command, or kept running by
`groundctl emulator start` for several.
"""

from __future__ import annotations

import logging
import socket
from contextlib import contextmanager
from typing import Iterator

from bootstrap.errors import BadInput, EngineError

EMULATOR_ACCOUNT_ID = "123456789012"  # moto's fixed account


def _check_port_free(host: str, port: int) -> None:
    # moto's server thread dies on a busy port while its starter waits forever; so ask first.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise BadInput(
                f"The emulator cannot listen on {host}:{port} ({exc.strerror or exc}). Pick another port "
                "with --port, or leave it out for a free one."
            ) from None


class Emulator:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False):
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            raise EngineError(
                "The local target needs the AWS emulator, which is not installed. Install it with "
                "`python -m pip install 'moto[server]'` (it is part of the `test` extra) and re-run."
            ) from None
        self._server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
        self._host, self._port, self._verbose = host, port, verbose
        self.endpoint_url: str | None = None

    def start(self) -> str:
        if self._port:
            _check_port_free(self._host, self._port)
        if not self._verbose:
            # The server logs every request on stderr; that would bury groundctl's own output.
            logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self.endpoint_url

    def stop(self) -> None:
        self._server.stop()


@contextmanager
def running_emulator(port: int = 0) -> Iterator[str]:
    emu = Emulator(port=port)
    endpoint = emu.start()
    try:
        yield endpoint
    finally:
        emu.stop()
