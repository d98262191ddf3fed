"""Calibration: the model's named efficiency factors, and every fit of them to measurements.

The pieces, lowest layer first:

* the factor types and their parsers: ``gpuplan.core.calibration`` (``serving.Calibration``,
  ``training.TrainingCalibration``);
* the bundled values (factors and priors): ``gpuplan.data.bundled_calibration``;
* the solver, robust regularised least squares in log space: ``gpuplan.core.calibration.solver``;
* fitting on published validation rows: ``serving_factors`` (which serving factors a row exercises,
  their ranges, the least squares over serving rows), ``published_serving`` (``gpuplan validate
  --fit-out``), ``published_training`` (training.csv) and ``crossval`` (held-out error, ``gpuplan
  validate --cross-validate``);
* fitting on the user's own measurements (``gpuplan calibrate``): ``measured_rows`` (results store or
  CSV as rows), ``measured_predict`` (the model's value for a row), ``measured_train`` (training rows
  through the training step model: their prediction and the MFU they solve for), ``measured`` (the
  three-stage fit) and ``calibrate`` (the command's flow);
* ``report``: the error of a calibration on measured rows, before and after a fit;
* ``profile``: reading and writing calibration profiles (``--calibration PROFILE``), and the
  provenance a fit stamps on them.

Calibration reads validation rows and predictions (``gpuplan.usecases.validation``), never the
reverse. Import from the submodules: this package imports nothing itself, so that loading a profile
does not pull in the results store (SQLAlchemy) or scipy.
"""

__all__: list[str] = []
