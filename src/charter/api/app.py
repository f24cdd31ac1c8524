"""The API application factory."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from charter import __version__
from charter.api.errors import install_error_handlers
from charter.core.errors import CharterError
from charter.db.database import Database, Role
from charter.db.queries import query


def create_app(database: Database) -> FastAPI:
    """An API bound to one database."""
    app = FastAPI(title="Charter", version=__version__)
    install_error_handlers(app)

    @app.get("/healthz", tags=["operations"])
    def healthz() -> Any:
        """Liveness and readiness: the database answers and is migrated."""
        try:
            with database.connection(Role.READER) as conn:
                row = conn.execute(query("health")).fetchone()
        except CharterError as exc:
            return JSONResponse(
                {"ok": False, "error": {"code": exc.code, "message": exc.message}},
                status_code=503,
            )
        return {"ok": True, "version": __version__, "schema_version": row[0] if row else 0}

    return app
