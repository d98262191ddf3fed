"""``gpuplan web``: serve the one-page app and the JSON API (docs/web.md), loopback by default."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuplan.core.errors import UserInputError
from gpuplan.interfaces.cli.app import CatalogOpt, app, catalog_from, check_listen_address, guarded
from gpuplan.interfaces.cli.render import console

WEB_HINT = "pip install 'gpuplan[web]'"


@app.command("web")
@guarded
def web_cmd(
    host: Annotated[str, typer.Option(help="address to listen on (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    catalog: CatalogOpt = None,
) -> None:
    """Serve the web page (plans, charts, GPU comparison) and the JSON API; OpenAPI at /docs."""
    if not 0 < port < 65536:
        raise UserInputError(f"--port {port} is not a TCP port (1-65535)")
    check_listen_address(host, port)

    def announce() -> None:
        console.print(
            f"gpuplan web on http://{host}:{port}/ (API docs: /docs); Ctrl-C stops it", highlight=False
        )

    try:  # the web extra (fastapi, uvicorn) is optional: its absence is a user error with the install hint
        from gpuplan.interfaces.web import serve

        serve(lambda: catalog_from(catalog), host, port, on_start=announce)
    except ImportError as exc:
        raise UserInputError(f"gpuplan web needs {exc.name}, which is not installed", hint=WEB_HINT) from None
