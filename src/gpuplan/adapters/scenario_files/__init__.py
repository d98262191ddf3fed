"""Scenario YAML documents: one document, one validated object (deployment, simulation, training)."""
