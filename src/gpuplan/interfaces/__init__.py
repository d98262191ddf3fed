"""Interfaces: the command line, the web app, and plots that only draw."""
