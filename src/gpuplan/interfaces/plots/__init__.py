"""Plotly figures of answers already computed (serving and training); they draw, they do not predict."""
