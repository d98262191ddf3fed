"""Model architectures from the outside: Hugging Face ``config.json`` parsers (``hf_config`` and the
per-family ``hf_*`` modules) and the registry that finds a model by id, path or Hub repo (``registry``).

The model description itself and its arithmetic are core: :mod:`gpuplan.core.model.spec` and
:mod:`gpuplan.core.model.arith`. Import from the submodules (``from gpuplan.adapters.models.registry
import get_model``); this package exports nothing, so importing one parser loads no other.
"""

__all__: list[str] = []
