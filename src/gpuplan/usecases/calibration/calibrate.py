"""The ``gpuplan calibrate`` flow: gather rows → fit → compare before/after → write the profile."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuplan.adapters.catalog.loader import Catalog
from gpuplan.core.errors import UserInputError
from gpuplan.data.bundled_calibration import default_calibration, default_training_calibration
from gpuplan.usecases.calibration.measured import fit_profile
from gpuplan.usecases.calibration.measured_rows import ResultRow, rows_from_csv, rows_from_store
from gpuplan.usecases.calibration.profile import load_calibration, load_training_calibration, write_profile
from gpuplan.usecases.calibration.report import compare


def gather_rows(
    results: Path | None,
    from_store: bool,
    store: str | None,
    run_ids: tuple[str, ...],
    deployment: Mapping[str, Any],
) -> tuple[list[ResultRow], list[str], str]:
    """The rows to fit, the runs left out (and why), and a description for the provenance."""
    if (results is None) == (not from_store):
        raise UserInputError(
            "give either a results CSV or --from-store", hint="gpuplan calibrate --from-store"
        )
    if results is not None:
        return rows_from_csv(results), [], str(results)
    rows, notes = rows_from_store(store, run_ids=run_ids, deployment=deployment)
    from gpuplan.adapters.store.database import Store

    return (
        rows,
        notes,
        f"results store {Store(store).display_url}" + (f" runs {', '.join(run_ids)}" if run_ids else ""),
    )


def calibrate_rows(
    rows: list[ResultRow],
    catalog: Catalog,
    *,
    base: Path | None,
    data: str,
    output: Path | None,
    command: str,
    notes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Fit, report errors before/after per kind and the factors changed; write the profile if asked.
    ``notes``: the runs left out and why (the first is the reason given when no row is left)."""
    if not rows:
        raise UserInputError(
            "no usable results to calibrate on" + (f": {notes[0]}" if notes else ""),
            hint="run gpuplan bench gpu / bench train / bench serve first, or pass a CSV",
        )
    start = load_calibration(base) if base else default_calibration()
    start_training = load_training_calibration(base) if base else default_training_calibration()
    cal, mfu, fitted = fit_profile(rows, catalog, start, data=data, command=command, training=start_training)
    training = start_training.model_copy(update={"mfu": start_training.mfu | mfu})
    errors = compare(rows, catalog, (start, start_training), (cal, training))
    unpredicted = _nothing_predicted(rows, catalog, start) if errors[-1].predicted == 0 else None
    factors = [
        {
            "factor": f"{field}.{key}" if key else field,
            "before": start.factor(field, key),
            "after": cal.factor(field, key),
        }
        for field, key in fitted
    ]
    if output is not None and unpredicted is None:
        write_profile(output, cal, mfu)
    return {
        "rows": len(rows),
        "errors": [e.model_dump() for e in errors],
        "factors": factors,
        "training_mfu": mfu,
        "training_mfu_before": {key: start_training.factor("mfu", key) for key in mfu},
        "profile": str(output) if output and unpredicted is None else None,
        "nothing_predicted": unpredicted,
        "calibration": cal.model_dump(mode="json"),
    }


def _nothing_predicted(rows: list[ResultRow], catalog: Catalog, cal: Any) -> str:
    """Why no row could be predicted, in one line (the first row's reason): nothing was fitted."""
    from gpuplan.usecases.calibration.measured_predict import unpredicted_reason

    return (
        f"none of the {len(rows)} rows can be predicted, so nothing is fitted: row {rows[0].id}: "
        + unpredicted_reason(rows[0], catalog, cal)
    )
