"""Named efficiency factors of the serving and training models, with their provenance (pure types)."""
