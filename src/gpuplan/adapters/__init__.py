"""Adapters to the outside: catalog files, model registry and Hub, scenario files, results store, load and
GPU benchmarks, Kubernetes."""
