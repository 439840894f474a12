"""Schemas for every kind we serve as a CRD and every configuration document (data only; see README.md)."""
