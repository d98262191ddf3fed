"""The web front end: ``create_app()`` builds the FastAPI app that ``gpuplan web`` serves with
``serve()`` (docs/web.md)."""

from gpuplan.interfaces.web.app import create_app, serve

__all__ = ["create_app", "serve"]
