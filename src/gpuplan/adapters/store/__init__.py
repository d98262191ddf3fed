"""The results store: every benchmark result, written as it is measured (SQLAlchemy; SQLite or PostgreSQL)."""

from gpuplan.adapters.store.database import RecordWriter, RunInfo, Store, default_store_url

__all__ = ["RecordWriter", "RunInfo", "Store", "default_store_url"]
